import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { apptainerArgs, createSandboxRuntime, INSIDE, type ManagedSandbox } from '../../src/server/sandbox/index.js';
import type { Logger } from '../../src/server/handlers/types.js';
import { testRoot } from './helpers.js';
import { alive, sandboxTree } from '../../src/server/sandbox/proc.js';

function recordingLog(): Logger & { warnings: string[] } {
  const warnings: string[] = [];
  const noop = (): void => undefined;
  return { warnings, debug: noop, info: noop, error: noop, warn: (_o: unknown, msg?: string) => void warnings.push(msg ?? '') };
}

describe('apptainer runtime (binary absent here: exact command line)', () => {
  it('builds the apptainer exec command line', () => {
    const argv = apptainerArgs({
      binary: 'apptainer',
      image: '/images/swe.sif',
      workspace: '/scratch/raas/ws/j1',
      run: '/scratch/raas/run/j1',
      toolServer: '/scratch/raas/tool-server/abc',
      network: false,
      fakeroot: true,
      env: { PATH: '/usr/bin:/bin', HOME: '/workspace' },
      command: ['node', '/opt/raas/tool-server/main.js', '{}'],
    });
    expect(argv).toEqual([
      'exec',
      '--containall',
      '--writable-tmpfs',
      '--fakeroot',
      '--net',
      '--network',
      'none',
      '--bind',
      '/scratch/raas/ws/j1:/workspace',
      '--bind',
      '/scratch/raas/run/j1:/run/raas',
      '--bind',
      '/scratch/raas/tool-server/abc:/opt/raas/tool-server:ro',
      '--pwd',
      '/workspace',
      '--env',
      'PATH=/usr/bin:/bin',
      '--env',
      'HOME=/workspace',
      '/images/swe.sif',
      'node',
      '/opt/raas/tool-server/main.js',
      '{}',
    ]);
    const withNet = apptainerArgs({
      binary: 'a',
      image: 'i.sif',
      workspace: 'w',
      run: 'r',
      toolServer: 't',
      network: true,
      fakeroot: false,
      env: {},
      command: ['x'],
    });
    expect(withNet).not.toContain('--network');
    expect(withNet).not.toContain('--fakeroot');
  });

  it('the runtime plans the same command line with the tool server options', () => {
    const root = testRoot('appt');
    const rt = createSandboxRuntime({ runtime: 'apptainer', root, apptainer: { binary: '/bin/true', image: '/images/x.sif' } });
    const p = rt.prepare();
    const plan = rt.plan(p, { workspace: `${root}/ws/j`, run: `${root}/run/j` }, { network: false });
    expect(plan.file).toBe('/bin/true');
    expect(plan.args.slice(0, 7)).toEqual(['exec', '--containall', '--writable-tmpfs', '--net', '--network', 'none', '--bind']);
    expect(plan.args).toContain('/images/x.sif');
    const opts = JSON.parse(plan.args.at(-1)!) as { socket: string; workspace: string };
    expect(opts.socket).toBe(INSIDE.socket);
    expect(opts.workspace).toBe('/workspace');
    fs.rmSync(root, { recursive: true, force: true });
  });

  it('without apptainer or singularity on PATH, open() names the fix', async () => {
    const rt = createSandboxRuntime({
      runtime: 'apptainer',
      root: testRoot('appt2'),
      apptainer: { binary: 'apptainer-not-installed', image: 'x.sif' },
    });
    await expect(rt.open({})).rejects.toMatchObject({
      code: 'sandbox_unavailable',
      message: expect.stringMatching(/apptainer nor singularity.*module load/),
    });
  });
});

describe('bwrap open(): abort and bad specs', () => {
  const root = testRoot('open');
  afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

  it('an abort during start rejects with the reason and leaves no process or workspace', async () => {
    const rt = createSandboxRuntime({ runtime: 'bwrap', root });
    rt.prepare();
    const ac = new AbortController();
    const p = rt.open({}, ac.signal);
    setTimeout(() => ac.abort(new Error('job cancelled during INIT')), 5);
    await expect(p).rejects.toThrow('job cancelled during INIT');
    expect(fs.readdirSync(path.join(root, 'ws'))).toEqual([]);
    expect(fs.readdirSync(path.join(root, 'run'))).toEqual([]);
    await rt.close();
  });

  it('close() while sandboxes are starting aborts them and resolves only once their workspaces are gone', async () => {
    const rt = createSandboxRuntime({ runtime: 'bwrap', root, close_grace_ms: 100 });
    rt.prepare();
    const opens = [rt.open({}), rt.open({})].map((p) =>
      p.then(
        () => 'opened',
        (e: Error) => e.message,
      ),
    );
    await new Promise((r) => setTimeout(r, 20));
    await rt.close();
    expect(fs.readdirSync(path.join(root, 'ws'))).toEqual([]);
    for (const r of await Promise.all(opens)) expect(['opened', 'the sandbox runtime closed while this sandbox was starting']).toContain(r);
    await expect(rt.open({})).rejects.toThrow(/closed/);
  });

  it('SandboxSpec.files keys must stay inside the workspace', async () => {
    const rt = createSandboxRuntime({ runtime: 'bwrap', root });
    for (const key of ['../escape.txt', '/etc/x', 'a/../../b']) {
      await expect(rt.open({ files: { [key]: 'x' } })).rejects.toMatchObject({
        code: 'bad_request',
        message: expect.stringContaining('SandboxSpec.files'),
      });
    }
    expect(fs.existsSync(path.join(root, 'escape.txt'))).toBe(false);
    await rt.close();
  });
});

describe('warm pool (sandbox.pool_size)', () => {
  const root = testRoot('pool');
  afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

  it('open() takes a pre-started sandbox and configures it with the spec; network specs start cold', async () => {
    const rt = createSandboxRuntime({ runtime: 'bwrap', root, pool_size: 2 });
    rt.warmup();
    for (let i = 0; i < 400 && rt.openSandboxes().length < 2; i++) await new Promise((r) => setTimeout(r, 25));
    const pooled = rt.openSandboxes();
    expect(pooled).toHaveLength(2);
    const sb = await rt.open({ files: { 'job.txt': 'job data' }, env: { FOO: 'bar' }, tools: ['bash'], limits: { processes: 50 } });
    expect(pooled).toContain(sb);
    expect((await sb.bash('cat job.txt; echo; echo $FOO; ulimit -u; id -u')).output).toMatch(/^job data\nbar\n50\n\d+\n$/);
    await expect(sb.python('1')).rejects.toThrow(/not enabled/);
    const net = await rt.open({ network: true });
    expect(pooled).not.toContain(net);
    await rt.close();
    expect(fs.readdirSync(path.join(root, 'ws'))).toEqual([]);
    expect(rt.openSandboxes()).toEqual([]);
  });
});

describe('process runtime (no isolation, explicit only)', () => {
  const root = testRoot('proc');
  afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

  it('runs the tools on the host, leases a loopback address, warns once, and close kills the tree', async () => {
    const log = recordingLog();
    const rt = createSandboxRuntime({ runtime: 'process', root }, { log });
    const a = (await rt.open({ files: { 'f.txt': 'content' } })) as ManagedSandbox;
    const b = (await rt.open({})) as ManagedSandbox;
    expect(log.warnings).toHaveLength(1);
    expect(a.address).toMatch(/^127\.\d+\.\d+\.\d+$/);
    expect(a.address).not.toBe(b.address);
    expect((await a.bash('cat f.txt; echo; echo $RAAS_LOOPBACK_ADDR')).output).toBe(`content\n${a.address}\n`);
    await a.bash('sleep 300 & (sleep 301 &); echo');
    const tree = sandboxTree(a.pid!);
    expect(tree.length).toBeGreaterThan(3);
    await rt.close();
    expect(tree.filter(alive)).toEqual([]);
    expect(a.leftover).toEqual([]);
    expect(fs.existsSync(path.join(root, 'ws'))).toBe(true);
    expect(fs.readdirSync(path.join(root, 'ws'))).toEqual([]);
    const leases = JSON.parse(fs.readFileSync(path.join(root, 'leases.json'), 'utf8')) as { leases: object };
    expect(leases.leases).toEqual({});
  });
});
