import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSandboxRuntime, ImageCache, type Runtime } from '../../src/server/sandbox/index.js';
import type { SandboxConfigInput } from '../../src/protocol/config-sandbox.js';
import { testRoot } from './helpers.js';

const root = testRoot('img');

// A setup script that records a unique build stamp: a rebuild changes it, a cache hit does not.
const setup =
  'set -e; mkdir -p pkg; cp deps.lock pkg/; head -c 8 /dev/urandom | od -An -tx1 | tr -d " \\n" > pkg/stamp; git --version > pkg/git.txt 2>&1 || true';

function runtime(images: SandboxConfigInput['images']): Runtime {
  return createSandboxRuntime({ runtime: 'bwrap', root, images });
}

/** The stamp of the image tree the cache hands out (what a sandbox's workspace starts from). */
async function stampOf(rt: Runtime, image: string): Promise<string> {
  rt.prepare();
  const dir = await rt.images!.resolve(image);
  return fs.readFileSync(path.join(dir, 'pkg/stamp'), 'utf8');
}

describe('image cache with real bwrap builds', () => {
  let rt: Runtime;
  beforeAll(() => {
    rt = runtime({
      v: { setup, files: { 'deps.lock': 'a==1' }, mode: 'versioned' },
      s: { setup, files: { 'deps.lock': 'a==1' }, mode: 'scratch' },
      l: { setup, files: { 'deps.lock': 'a==1' }, mode: 'lock', lockfile: 'deps.lock' },
      child: { setup: 'echo child > child.txt', base: 'v', mode: 'versioned' },
      broken: { setup: 'echo going; exit 7', mode: 'versioned' },
    });
  });
  afterAll(async () => {
    await rt.close();
    fs.rmSync(root, { recursive: true, force: true });
  });

  it('versioned: built once inside a sandbox, then reused (hit), workspace starts from the tree', async () => {
    const sb = await rt.open({ image: 'v', tools: ['bash'] });
    const first = (await sb.bash('cat pkg/stamp; ls -a')).output;
    await sb.close();
    expect(first).toContain('deps.lock');
    expect(first).not.toContain('.raas-image-setup.sh');
    const second = await stampOf(rt, 'v');
    expect(first.startsWith(second)).toBe(true);
    expect(rt.images!.stats.get('v')).toEqual({ builds: 1, hits: 1 });
  });

  it('versioned: a new framework version gives a new key and a rebuild', async () => {
    const other = new ImageCache({ root: path.join(root, 'images'), runtime: rt, frameworkVersion: '99.0.0' });
    expect(other.key('v')).not.toBe(rt.images!.key('v'));
    const dir = await other.resolve('v');
    expect(other.stats.get('v')).toEqual({ builds: 1, hits: 0 });
    expect(fs.readFileSync(path.join(dir, 'pkg/stamp'), 'utf8')).not.toBe(await stampOf(rt, 'v'));
  });

  it('scratch: rebuilt on every use', async () => {
    const a = await stampOf(rt, 's');
    const b = await stampOf(rt, 's');
    expect(a).not.toBe(b);
    expect(rt.images!.stats.get('s')).toEqual({ builds: 2, hits: 0 });
  });

  it('lock: reused while the lockfile hash is unchanged, rebuilt when it changes', async () => {
    const a = await stampOf(rt, 'l');
    const same = runtime({
      l: { setup: setup + '; echo other-template', files: { 'deps.lock': 'a==1' }, mode: 'lock', lockfile: 'deps.lock' },
    });
    expect(same.prepare() && same.images!.key('l')).toBe(rt.images!.key('l'));
    expect(await stampOf(same, 'l')).toBe(a);
    const bumped = runtime({ l: { setup, files: { 'deps.lock': 'a==2' }, mode: 'lock', lockfile: 'deps.lock' } });
    bumped.prepare();
    expect(bumped.images!.key('l')).not.toBe(rt.images!.key('l'));
    expect(await stampOf(bumped, 'l')).not.toBe(a);
    expect(bumped.images!.stats.get('l')).toEqual({ builds: 1, hits: 0 });
  });

  it('an image built on a base image contains both trees', async () => {
    const sb = await rt.open({ image: 'child' });
    expect((await sb.bash('cat child.txt; test -f pkg/stamp && echo has-base')).output).toBe('child\nhas-base\n');
    await sb.close();
  });

  it('a failing setup script is an error carrying its output; nothing is cached', async () => {
    await expect(rt.open({ image: 'broken' })).rejects.toMatchObject({
      code: 'sandbox_error',
      message: expect.stringMatching(/exit 7[\s\S]*going/),
    });
    expect(fs.readdirSync(path.join(root, 'images')).filter((f) => f.startsWith('broken-') && !f.endsWith('.json'))).toEqual([]);
    await expect(rt.open({ image: 'undefined-image' })).rejects.toThrow(/not defined.*sandbox\.images/);
  });

  it('renders the apptainer build command line for an image (command line only)', () => {
    const b = rt.images!.apptainerBuild('v');
    expect(b.argv).toEqual(['build', '--force', b.sif, `${b.sif}.def`]);
    expect(b.definition).toMatch(/^Bootstrap: docker\nFrom: debian:12-slim/);
    expect(b.definition).toContain('cp deps.lock pkg/');
  });
});
