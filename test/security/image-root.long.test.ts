// Red team against sandboxes rooted in an image. The isolation attacks of isolation.test.ts run
// again in a Debian image (mmdebstrap, test/helpers/images.ts), and the image itself is hostile
// input: setuid files, device nodes, absolute symlinks (at paths the sandbox mounts, and around the
// files the host reads), an /etc/ld.so.preload aimed at the tool server, a 20 GiB sparse file, an
// OCI layer that climbs out of its tree. Every job goes through the real server.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { runToolAgent } from '../../src/server/handlers/common/run.js';
import type { AgentHandler } from '../../src/server/handlers/types.js';
import { debianImage, ociOf } from '../helpers/images.js';
import { processTable } from '../helpers/procs.js';
import { closeCanaries, isolationAttacks } from './isolation-cases.js';
import {
  answered,
  bash,
  expectNoLeak,
  expectNothingLeft,
  expectPlantedUnchanged,
  finish,
  hex,
  IS_ROOT,
  observations,
  plantSecrets,
  removeSecrets,
  sleep,
  snapshotPlanted,
  startHarness,
  summary,
  type Harness,
  type Secrets,
} from './helpers.js';

/** A task whose sandbox is rooted in one of the images the server config names (handlers.rt-image.images). */
const ImageInstance = z.looseObject({
  data_source: z.literal('rt-image'),
  instance_id: z.string().optional(),
  prompt: z.string(),
  image: z.string().default('debian'),
  network: z.boolean().default(false),
});
const imageHandler: AgentHandler<z.infer<typeof ImageInstance>> = {
  name: 'rt-image',
  instance: ImageInstance,
  async init(ctx) {
    const ref = (ctx.config.images as Record<string, string>)[ctx.job.instance.image];
    if (!ref) throw new Error(`no image ${ctx.job.instance.image}`);
    const spec = { rootImage: { ref, workdir: '/workspace' }, network: ctx.job.instance.network };
    return { runtime: await ctx.sandboxes.open(spec, ctx.signal) };
  },
  async run(ctx) {
    const { run } = await runToolAgent(ctx, {
      messages: [
        { role: 'system', content: 'You are an engineer working in a sandbox.' },
        { role: 'user', content: ctx.job.instance.prompt },
      ],
      tools: ['execute_bash', 'execute_ipython_cell', 'str_replace_editor', 'finish'],
      defaults: { max_iterations: 10 },
    });
    return run;
  },
  async eval() {
    return { reward: 0, resolved: false };
  },
};

let h: Harness;
let s: Secrets;
let before: Map<string, string>;
let hostIp = '';
let work: string;
const images: Record<string, string> = {};

/** The Debian image with extra files, hard-linked (nothing of the cached image is changed: only new files are written). */
function derived(name: string, base: string, add: (dir: string) => void): string {
  const dir = path.join(work, name);
  execFileSync('cp', ['-al', base, dir]);
  add(dir);
  return dir;
}

beforeAll(async () => {
  s = plantSecrets('img');
  work = fs.mkdtempSync(path.join(IS_ROOT ? '/var/tmp' : os.tmpdir(), 'raas-rt-images-'));
  const debian = await debianImage();
  images.debian = debian;
  // Hostile content: a setuid-root copy of id, device nodes, links out of the tree, a preload for the tool server.
  const secretEnv = path.join(s.varTmpDir, 'env');
  fs.mkdirSync(secretEnv, { recursive: true });
  fs.writeFileSync(path.join(secretEnv, '10-docker2singularity.sh'), `export RTSECRET="${s.values.varTmpFile}"\n`);
  images.hostile = derived('hostile', debian, (d) => {
    fs.copyFileSync(path.join(d, 'usr/bin/id'), path.join(d, 'suid-id'));
    if (IS_ROOT) {
      fs.chmodSync(path.join(d, 'suid-id'), 0o6755);
      execFileSync('mknod', ['-m', '666', path.join(d, 'rawdisk'), 'b', '8', '0']);
      execFileSync('mknod', ['-m', '666', path.join(d, 'kmem'), 'c', '1', '2']);
    }
    fs.symlinkSync('/etc/shadow', path.join(d, 'etc/host-shadow'));
    fs.symlinkSync(s.files.varTmpSecret, path.join(d, 'host-secret'));
    fs.mkdirSync(path.join(d, '.singularity.d'));
    fs.symlinkSync(secretEnv, path.join(d, '.singularity.d/env'));
    fs.writeFileSync(path.join(d, 'etc/ld.so.preload'), '/usr/lib/x86_64-linux-gnu/libbz2.so.1.0\n');
  });
  // A link where the sandbox mounts its /tmp, towards what the host sees as / during bwrap's set-up.
  images.tmplink = derived('tmplink', debian, (d) => {
    fs.rmSync(path.join(d, 'tmp'), { recursive: true });
    fs.symlinkSync('/oldroot/etc', path.join(d, 'tmp'));
  });
  // 20 GiB that take no disk: the cache's copy keeps the file sparse.
  images.sparse = derived('sparse', debian, (d) => execFileSync('truncate', ['-s', '20G', path.join(d, 'big')]));
  // An OCI layer that writes through an absolute symlink it made and through "..".
  const layout = path.join(work, 'climb.oci');
  execFileSync('cp', ['-al', await ociOf('debian', debian), layout]);
  const layer = path.join(work, 'climb.tar');
  const escaped = path.join(s.varTmpDir, 'escaped');
  execFileSync('/usr/bin/python3', [
    '-c',
    [
      'import io, sys, tarfile',
      't = tarfile.open(sys.argv[1], "w")',
      'l = tarfile.TarInfo("out"); l.type = tarfile.SYMTYPE; l.linkname = sys.argv[2]; t.addfile(l)',
      'for name in ("out/escaped-via-link", "../../../../../../../" + sys.argv[2].lstrip("/") + "/escaped-via-dots"):',
      '    f = tarfile.TarInfo(name); data = b"RTESCAPE\\n"; f.size = len(data); t.addfile(f, io.BytesIO(data))',
      't.close()',
    ].join('\n'),
    layer,
    s.varTmpDir,
  ]);
  execFileSync('umoci', ['raw', 'add-layer', '--image', `${layout}:latest`, layer]);
  images.climb = layout;
  expect(fs.existsSync(escaped)).toBe(false);
  execFileSync('chmod', ['-R', 'a+rX', work]);

  h = await startHarness('img', {
    secrets: s,
    handlers: [imageHandler as AgentHandler<any>],
    server: { handlers: { 'rt-image': { images } } } as never,
  });
  before = snapshotPlanted(s);
  hostIp =
    Object.values(os.networkInterfaces())
      .flat()
      .find((a) => a && a.family === 'IPv4' && !a.internal)?.address ?? '';
}, 900_000);

afterAll(async () => {
  await h?.close();
  closeCanaries();
  removeSecrets(s);
  if (work) fs.rmSync(work, { recursive: true, force: true });
}, 300_000);

isolationAttacks({
  label: 'rooted in a Debian image',
  harness: () => h,
  secrets: () => s,
  task: (marker) => ({ data_source: 'rt-image', instance_id: `iso-${hex(3)}`, prompt: `${marker} look around` }),
  netTask: (prompt, network = true) => ({ data_source: 'rt-image', instance_id: `net-${hex(3)}`, prompt, network }),
  hostIp: () => hostIp,
});

/** A job in image `image` running `command` in bash. */
async function inImage(image: string, command: string, timeout = 60): Promise<any> {
  const m = h.script(`img-${image}-${hex(3)}`, [bash(command, timeout), finish()]);
  const a = await h.process({ instance: { data_source: 'rt-image', instance_id: `img-${hex(3)}`, prompt: `${m} go`, image } });
  expectNoLeak(a.text, s);
  return answered(a);
}

describe.concurrent('a hostile image', { timeout: 300_000 }, () => {
  it('its setuid files and device nodes are gone, its links resolve inside it, the host never reads through them', async () => {
    const r = await inImage(
      'hostile',
      [
        'ls -l /suid-id | cut -c1-10',
        '/suid-id -u',
        'ls /rawdisk /kmem 2>&1',
        'cat /etc/host-shadow | head -1 | cut -d: -f1',
        'cat /host-secret 2>&1',
        'env | grep -c RTSECRET',
        'echo done',
      ].join('; '),
    );
    const out = observations(r).join('\n');
    expect(out, summary(r)).toMatch(/^-rwxr-xr-x\n0\n/m);
    expect(out).toMatch(/\/rawdisk'?: No such file or directory/);
    expect(out).toMatch(/\/kmem'?: No such file or directory/);
    // The image's own /etc/shadow (its first user is root) and no host file through the links.
    expect(out).toMatch(/^root$/m);
    expect(out).toMatch(/host-secret'?: No such file or directory/);
    expect(out).toMatch(/^0\ndone/m);
    // On the host: the cache's trees have neither setuid bits nor device nodes; a conversion under
    // way (which may hold them for a moment) is in a directory only root can enter.
    const cache = path.join(h.sandboxRoot, 'rootfs');
    for (const e of fs.readdirSync(cache)) {
      const p = path.join(cache, e);
      if (/^[0-9a-f]{32}$/.test(e)) {
        const args = [p, '-xdev', '(', '-perm', '/6000', '-type', 'f', ')', '-o', '-type', 'b', '-o', '-type', 'c'];
        expect(spawnSync('find', args, { encoding: 'utf8' }).stdout.trim(), p).toBe('');
      } else if (e.startsWith('.tmp-')) {
        const st = fs.statSync(p, { throwIfNoEntry: false });
        // Opened to others only once flattened, its record written, a moment before it is renamed into place.
        if (st && (st.mode & 0o777) !== 0o700) expect(fs.existsSync(path.join(p, 'complete.json')) || !fs.existsSync(p), p).toBe(true);
      }
    }
  });

  it('its /etc/ld.so.preload is used by its own programs, never by the tool server', async () => {
    const pending = inImage('hostile', 'grep -c libbz2 /proc/self/maps; sleep 4; echo slept', 30);
    let maps = '';
    let settled = false;
    void pending.finally(() => (settled = true));
    while (!settled && !maps) {
      await sleep(250);
      for (const p of processTable()) {
        if (!p.cmd.startsWith('/.raas/lib/node /.raas/tool-server/main.js')) continue;
        maps += fs.readFileSync(`/proc/${p.pid}/maps`, 'utf8');
      }
    }
    const r = await pending;
    // bash, the image's program, has the library preloaded (grep counts its own mapping of it).
    expect(observations(r).join('\n'), summary(r)).toMatch(/^[1-9]\d*\nslept/m);
    expect(maps, 'a tool server of an image sandbox was seen on the host').toMatch(/ld\.so/);
    expect(maps).not.toContain('libbz2');
  });

  it('a link where the sandbox mounts /tmp: the job fails at INIT saying why, and nothing of the host moves', async () => {
    const m = h.script('img-tmplink', [bash('echo inside'), finish()]);
    const a = await h.process({ instance: { data_source: 'rt-image', instance_id: 'tmplink', prompt: `${m} go`, image: 'tmplink' } });
    expectNoLeak(a.text, s);
    const r = answered(a);
    expect(r.critical_error, summary(r)).toBe('init');
    expect(r.error).toMatch(/\/tmp is a symbolic link, and an image-rooted sandbox mounts \/tmp there/);
  });

  it('a 20 GiB sparse file unpacks to nothing on the disk', async () => {
    const r = await inImage('sparse', 'ls -ls /big | cut -d" " -f1; stat -c %s /big');
    expect(observations(r).join('\n'), summary(r)).toMatch(/^0\n21474836480$/m);
    const cache = path.join(h.sandboxRoot, 'rootfs');
    const bigs = fs
      .readdirSync(cache)
      .filter((e) => /^[0-9a-f]{32}$/.test(e))
      .map((e) => fs.statSync(path.join(cache, e, 'rootfs/big'), { throwIfNoEntry: false }))
      .filter((st) => st !== undefined);
    expect(bigs.map((st) => [st.size, st.blocks])).toEqual([[20 * 2 ** 30, 0]]);
  });

  it('an OCI layer that climbs out of its tree (an absolute link it made, "..") writes nothing outside', async () => {
    const r = await inImage('climb', 'ls -la /out 2>&1; find / -xdev -name "escaped-via-*" 2>/dev/null; echo listed');
    const out = observations(r).join('\n');
    observed(out);
    expect(out + String(r.error), summary(r)).toMatch(/listed|invalid|climb|umoci/);
    for (const f of ['escaped', 'escaped-via-link', 'escaped-via-dots']) expect(fs.existsSync(path.join(s.varTmpDir, f)), f).toBe(false);
  });
});

/** Records what a test saw (printed with the output). */
function observed(text: string): void {
  console.info(`[observed] ${text.replace(/\s+/g, ' ').slice(0, 300)}`);
}

describe('the host after every attack of this file', { timeout: 120_000 }, () => {
  it('planted files unchanged, no process of ours left, /health fast', async () => {
    expectPlantedUnchanged(before, s);
    await expectNothingLeft(h);
    expect(await h.health()).toBeLessThan(1000);
  });
});
