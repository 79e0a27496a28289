// Red team against image-rooted sandboxes: an image is hostile input. Its conversion into the cache
// (OCI layers with links, '..', absolute names, hard links and whiteouts aimed at host files; a
// `docker save` archive whose layers are links or host paths; setuid, setgid, file capabilities and
// device nodes; a compression bomb against the budget; concurrent first use by two stores), and its
// run (the tool server's node against the image's LD_* environment, NODE_OPTIONS, ld.so.preload,
// nsswitch.conf; mount points and working directories the image sabotages; the host's network, its
// files, other sandboxes, user namespaces). Real bwrap sandboxes and the real cache, as the sandbox
// user; secrets planted on the host as in the rest of the suite.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSandboxRuntime, type Runtime } from '../../src/server/sandbox/index.js';
import { busyboxImage } from '../helpers/images.js';
import { hostServer } from '../sandbox/helpers.js';
import { compileHijack, dockerArchive, type Entry, fileDigest, filesHolding, ociLayout } from './image-kit.js';
import {
  IS_ROOT,
  ProcWatch,
  expectPlantedUnchanged,
  hex,
  plantSecrets,
  removeSecrets,
  sandboxRootFor,
  snapshotPlanted,
  waitGone,
  type Secrets,
} from './helpers.js';

const sandboxId = (): { uid: number; gid: number } | undefined => {
  const r = spawnSync('id', ['-u', 'raas-sandbox'], { encoding: 'utf8' });
  if (!IS_ROOT || r.status !== 0) return undefined;
  return { uid: Number(r.stdout.trim()), gid: Number(spawnSync('id', ['-g', 'raas-sandbox'], { encoding: 'utf8' }).stdout.trim()) };
};

let secrets: Secrets;
let before: Map<string, string>;
let base: string;
let cacheDir: string;
let sbRoot: string;
let rt: Runtime;
let bb: string;
let baseTar: string;
let watch: ProcWatch;
const UP = '../'.repeat(16);

/** Converts `ref` through the runtime's cache: the image's tree, or the error that refused it. */
async function convert(ref: string): Promise<{ dir?: string; error?: string }> {
  try {
    return { dir: (await rt.roots.store().resolve(ref)).dir };
  } catch (e) {
    return { error: (e as Error).message };
  }
}

/** The host is as it was: planted files unchanged, no secret anywhere in the cache. */
function expectHostUnharmed(what: string): void {
  expectPlantedUnchanged(before, secrets);
  expect(filesHolding(cacheDir, Object.values(secrets.values)), `${what}: host secrets in the image cache`).toEqual([]);
}

beforeAll(async () => {
  secrets = plantSecrets('images');
  base = `/var/tmp/raas-rtimg-${process.pid}-${hex(3)}`;
  fs.mkdirSync(base, { recursive: true, mode: 0o755 });
  fs.chmodSync(base, 0o755);
  cacheDir = path.join(base, 'cache');
  sbRoot = sandboxRootFor('images');
  bb = await busyboxImage();
  baseTar = path.join(base, 'busybox.tar');
  execFileSync('tar', ['-C', bb, '--numeric-owner', '-cf', baseTar, '.']);
  rt = createSandboxRuntime({
    runtime: 'bwrap',
    root: sbRoot,
    image_roots: { cache_dir: cacheDir, budget_gb: 2 },
    limits: { processes: 64, memory_mb: 512, tmp_size_mb: 32 },
    disk_mb: 64,
  });
  watch = new ProcWatch(process.pid, [secrets.procMark]);
  before = snapshotPlanted(secrets);
}, 600_000);

afterAll(async () => {
  watch?.stop();
  await rt?.close();
  fs.rmSync(sbRoot, { recursive: true, force: true });
  fs.rmSync(base, { recursive: true, force: true });
  removeSecrets(secrets);
});

describe('an OCI layer aimed at host files', () => {
  const V = (): string => secrets.files.victimDir;
  const S = (): string => secrets.files.varTmpSecret;
  const vectors: Array<[string, () => Entry[][]]> = [
    [
      'an absolute link, then a file written through it',
      () => [[{ name: 'evil', type: 'symlink', link: V() }], [{ name: 'evil/pwn.txt', data: 'pwned' }]],
    ],
    [
      'a climbing relative link, then a file written through it',
      () => [[{ name: 'rel', type: 'symlink', link: `${UP}${V().slice(1)}` }], [{ name: 'rel/pwn.txt', data: 'pwned' }]],
    ],
    [
      'an absolute link, then a whiteout through it',
      () => [[{ name: 'evil', type: 'symlink', link: V() }], [{ name: 'evil/.wh.keep.txt' }]],
    ],
    [
      'an absolute link, then an opaque whiteout through it',
      () => [[{ name: 'evil', type: 'symlink', link: `${V()}/sub` }], [{ name: 'evil/.wh..wh..opq' }]],
    ],
    [
      'a link and a file through it in the same layer',
      () => [
        [
          { name: 'd', type: 'symlink', link: V() },
          { name: 'd/pwn.txt', data: 'x' },
        ],
      ],
    ],
    [
      'a chain of links, then a file and a whiteout through it',
      () => [
        [
          { name: 'a', type: 'symlink', link: 'b' },
          { name: 'b', type: 'symlink', link: V() },
        ],
        [{ name: 'a/pwn.txt', data: 'x' }, { name: 'a/.wh.keep.txt' }],
      ],
    ],
    [
      'a directory replaced by a link in a later layer, then written through',
      () => [
        [{ name: 'etc2', type: 'dir' }],
        [
          { name: 'etc2', type: 'symlink', link: V() },
          { name: 'etc2/pwn.txt', data: 'x' },
        ],
      ],
    ],
    ['a hard link to an absolute host path', () => [[{ name: 'stolen', type: 'hardlink', link: S() }]]],
    ['a hard link climbing with ..', () => [[{ name: 'stolen', type: 'hardlink', link: `${UP}${S().slice(1)}` }]]],
    [
      'a hard link through a link to the host',
      () => [[{ name: 'evil', type: 'symlink', link: secrets.varTmpDir }], [{ name: 'stolen', type: 'hardlink', link: 'evil/secret.txt' }]],
    ],
    ['a name climbing with ..', () => [[{ name: `${UP}${V().slice(1)}/climb.txt`, data: 'x' }]]],
    ['an absolute name', () => [[{ name: `${V()}/abs.txt`, data: 'x' }]]],
    ['whiteouts of . and ..', () => [[{ name: 'bin/.wh..' }, { name: 'etc/.wh...' }]]],
    ['a whiteout climbing with ..', () => [[{ name: `${UP}${V().slice(1)}/.wh.keep.txt` }]]],
  ];

  it.each(vectors)('%s: refused, or kept inside the image; the host is unharmed', async (name, layers) => {
    const layout = ociLayout(path.join(base, `oci-${hex(4)}`), [baseTar, ...layers()]);
    const r = await convert(layout);
    console.info(`[observed] ${name}: ${r.error ? `refused: ${r.error.slice(0, 200)}` : `converted to ${r.dir}`}`);
    expectHostUnharmed(name);
    if (r.dir) {
      // What the layers made stays in the image's tree: links stay links, nothing points at the host's inodes.
      for (const f of ['stolen', 'evil/pwn.txt', 'd/pwn.txt']) {
        const st = fs.lstatSync(path.join(r.dir, f), { throwIfNoEntry: false });
        if (st?.isFile()) expect(st.ino, f).not.toBe(fs.statSync(S()).ino);
      }
    }
  });
});

describe('a docker save archive whose layers are links or host paths', () => {
  const cases: Array<[string, () => { layers: string[]; members: Entry[] }]> = [
    [
      'a layer that is a link to a host tar',
      () => ({ layers: ['l/layer.tar'], members: [{ name: 'l/layer.tar', type: 'symlink', link: secrets.files.varTmpTar }] }),
    ],
    [
      'a layer that is a climbing link',
      () => ({
        layers: ['l/layer.tar'],
        members: [{ name: 'l/layer.tar', type: 'symlink', link: `${UP}${secrets.files.varTmpTar.slice(1)}` }],
      }),
    ],
    [
      'a layer that is a hard link to a host tar',
      () => ({ layers: ['l/layer.tar'], members: [{ name: 'l/layer.tar', type: 'hardlink', link: secrets.files.varTmpTar }] }),
    ],
    ['a layer named by an absolute host path', () => ({ layers: [secrets.files.varTmpTar], members: [] })],
    ['a layer named by a climbing path', () => ({ layers: [`${UP}${secrets.files.varTmpTar.slice(1)}`], members: [] })],
  ];

  it.each(cases)('%s: refused, or the host tar is not in the image', async (name, make) => {
    // The attacker knows the host tar's digest (the worst case): the config's diff_id matches it.
    const archive = dockerArchive(path.join(base, `docker-${hex(4)}.tar`), { ...make(), diffIds: [fileDigest(secrets.files.varTmpTar)] });
    const r = await convert(archive);
    console.info(`[observed] ${name}: ${r.error ? `refused: ${r.error.slice(0, 200)}` : `converted to ${r.dir}`}`);
    expectHostUnharmed(name);
    if (r.dir) expect(fs.existsSync(path.join(r.dir, 'leak.txt')), 'the host tar became a layer').toBe(false);
  });
});

describe('setuid, setgid, file capabilities and device nodes in an image', () => {
  const id = sandboxId();
  const hasSetcap = spawnSync('setcap', ['-v', 'cap_setuid+ep', '/nonexistent']).error === undefined;

  // The cache's pass over a converted tree clears setuid/setgid bits and chowns files to the sandbox
  // user, which drops file capabilities; a file the image already gives to the sandbox user kept
  // its capabilities (cp -a copies them) in a cache every host user can reach: running it made
  // `nobody` root. Now every file is chowned.
  (id !== undefined && hasSetcap ? it : it.skip)(
    'none reach the cache (directory form): no host user gains a privilege from an image',
    async () => {
      const img = path.join(base, `setid-${hex(3)}`);
      execFileSync('cp', ['-a', bb, img]);
      const py = fs.realpathSync('/usr/bin/python3');
      const add = (name: string, mode: number, owner?: { uid: number; gid: number }, caps?: string): void => {
        const p = path.join(img, 'bin', name);
        fs.copyFileSync(py, p);
        if (owner) fs.chownSync(p, owner.uid, owner.gid);
        fs.chmodSync(p, mode);
        if (caps) execFileSync('setcap', [caps, p]);
      };
      add('suid-root', 0o4755);
      add('sgid-root', 0o2755);
      add('suid-owned', 0o4755, id);
      add('caps-root', 0o755, undefined, 'cap_setuid,cap_dac_read_search+ep');
      add('caps-owned', 0o755, id, 'cap_setuid,cap_dac_read_search+ep');
      // Raw access to the host's memory and to the disk the cache lives on, for whoever reaches the cache.
      const disk = fs.statSync(base).dev;
      execFileSync('mknod', [path.join(img, 'mem'), 'c', '1', '1']);
      execFileSync('mknod', [path.join(img, 'disk'), 'b', String(Math.floor(disk / 256)), String(disk % 256)]);
      const r = await convert(img);
      expect(r.error).toBeUndefined();
      const dir = r.dir!;
      const caps = execFileSync('getcap', ['-r', dir], { encoding: 'utf8' }).trim();
      const setid: string[] = [];
      const devices: string[] = [];
      const walk = (p: string): void => {
        const st = fs.lstatSync(p);
        if (st.isDirectory()) for (const e of fs.readdirSync(p)) walk(path.join(p, e));
        else if (st.isBlockDevice() || st.isCharacterDevice()) devices.push(p);
        else if (st.isFile() && st.mode & 0o6000) setid.push(p);
      };
      walk(dir);
      // A host user who reaches the cache runs the image's file: can it become root?
      const escalate = spawnSync(
        'runuser',
        ['-u', 'nobody', '--', path.join(dir, 'bin/caps-owned'), '-c', 'import os; os.setuid(0); print("root")'],
        {
          encoding: 'utf8',
        },
      );
      expect({ caps, setid, devices, escalated: escalate.stdout.includes('root') }).toEqual({
        caps: '',
        setid: [],
        devices: [],
        escalated: false,
      });
    },
    120_000,
  );

  it.runIf(id !== undefined)('none reach the cache (OCI form: PAX capability xattrs, setuid entries, device nodes)', async () => {
    // VFS_CAP_REVISION_2 with the effective bit, permitted CAP_SETUID (little-endian): what
    // `setcap cap_setuid+ep` writes. Byte 0x80 goes as a lone surrogate, which Python's tarfile
    // writes as that raw byte (hdrcharset=BINARY).
    const capSetuid = String.fromCharCode(1, 0, 0, 2, 0xdc80, ...new Array(15).fill(0));
    const layout = ociLayout(path.join(base, `oci-setid-${hex(3)}`), [
      baseTar,
      [
        {
          name: 'bin/caps-owned',
          data: '#!/bin/sh\n',
          mode: 0o755,
          uid: id!.uid,
          gid: id!.gid,
          pax: { 'SCHILY.xattr.security.capability': capSetuid },
        },
        { name: 'bin/caps-root', data: '#!/bin/sh\n', mode: 0o755, pax: { 'SCHILY.xattr.security.capability': capSetuid } },
        { name: 'bin/suid', data: '#!/bin/sh\n', mode: 0o6755 },
        { name: 'mem', type: 'chr', dev: [1, 1] },
        { name: 'disk', type: 'blk', dev: [8, 0] },
      ],
    ]);
    const r = await convert(layout);
    expect(r.error, r.error).toBeUndefined();
    expect(execFileSync('getcap', ['-r', r.dir!], { encoding: 'utf8' }).trim()).toBe('');
    for (const f of ['bin/caps-owned', 'bin/caps-root', 'bin/suid', 'mem', 'disk']) {
      const st = fs.lstatSync(path.join(r.dir!, f), { throwIfNoEntry: false });
      if (st)
        expect({ f, dev: st.isBlockDevice() || st.isCharacterDevice(), setid: (st.mode & 0o6000) !== 0 }).toEqual({
          f,
          dev: false,
          setid: false,
        });
    }
  });
});

describe("the tool server against the image's loader settings and environment", () => {
  it('loads nothing of the image: LD_PRELOAD, LD_AUDIT, LD_LIBRARY_PATH, NODE_OPTIONS, ld.so.preload, ld.so.cache, nsswitch.conf', async () => {
    const so = compileHijack(path.join(base, 'hijack.so'), '/tmp');
    const arch = spawnSync('gcc', ['-dumpmachine'], { encoding: 'utf8' }).stdout.trim() || 'x86_64-linux-gnu';
    const soData = so ? fs.readFileSync(so).toString('base64') : '';
    const lib = (name: string): Entry[] => (so ? [{ name, b64: soData, mode: 0o755 }] : []);
    const layout = ociLayout(
      path.join(base, `oci-hijack-${hex(3)}`),
      [
        baseTar,
        [
          { name: 'lib', type: 'dir' },
          { name: 'lib/evil', type: 'dir' },
          { name: `lib/${arch}`, type: 'dir' },
          { name: 'usr', type: 'dir' },
          { name: 'usr/lib', type: 'dir' },
          { name: `usr/lib/${arch}`, type: 'dir' },
          ...lib('lib/hijack.so'),
          ...lib(`lib/${arch}/libnss_rtevil.so.2`),
          ...lib(`usr/lib/${arch}/libnss_rtevil.so.2`),
          ...lib('lib/libnss_rtevil.so.2'),
          ...lib('lib/evil/libstdc++.so.6'),
          { name: 'etc/ld.so.preload', data: '/lib/hijack.so\n' },
          { name: 'etc/ld.so.cache', data: 'glibc-ld.so.cache1.1garbage' },
          { name: 'etc/nsswitch.conf', data: 'passwd: rtevil files\ngroup: rtevil files\nhosts: rtevil files\nshadow: rtevil\n' },
          { name: 'etc/passwd', data: 'root:x:0:0:root:/nonexistent:/bin/false\n' },
          { name: 'hijack.js', data: "require('fs').writeFileSync('/tmp/raas-hijack-node-' + process.pid, process.execPath);\n" },
        ],
      ],
      {
        env: [
          'LD_PRELOAD=/lib/hijack.so',
          'LD_AUDIT=/lib/hijack.so',
          'LD_LIBRARY_PATH=/lib/evil',
          'NODE_OPTIONS=--require=/hijack.js',
          'PATH=/bin',
        ],
      },
    );
    const sb = await rt.open({ rootImage: { ref: layout } });
    try {
      // Everything the tool server does on the task's behalf.
      expect((await sb.exec(['sh', '-c', 'echo hi'])).stdout).toBe('hi\n');
      await sb.edit({ command: 'create', path: `${sb.workspace}/a.txt`, file_text: 'x\n' });
      await sb.edit({ command: 'view', path: sb.workspace });
      expect((await sb.readFile('a.txt')).toString()).toBe('x\n');
      await sb.writeFiles({ 'b.txt': 'y' });
      await sb.bash('echo hi').catch(() => undefined);
      await sb.python('1').catch(() => undefined);
      const marks = (await sb.exec(['sh', '-c', 'for f in /tmp/raas-hijack-*; do [ -e "$f" ] && echo "$f: $(cat "$f")"; done; true']))
        .stdout;
      console.info(`[observed] hijack markers (the .so ${so ? 'compiled' : 'not compiled: no gcc'}): ${JSON.stringify(marks)}`);
      expect(
        marks.split('\n').filter((l) => l.includes('/.raas/')),
        "the tool server loaded the image's code",
      ).toEqual([]);
      expect(marks).not.toMatch(/raas-hijack-node/);
    } finally {
      await sb.close();
    }
  });
});

describe('mount points and working directories the image sabotages', () => {
  const cases: Array<[string, Entry[], string | undefined]> = [
    ['/.raas is a file', [{ name: '.raas', data: 'x' }], undefined],
    ['/.raas is a link to /tmp', [{ name: '.raas', type: 'symlink', link: '/tmp' }], undefined],
    [
      '/.raas holds a fake tool server',
      [
        { name: '.raas', type: 'dir' },
        { name: '.raas/tool-server', type: 'dir' },
        { name: '.raas/tool-server/main.js', data: "require('fs').writeFileSync('/tmp/raas-hijack-node', '1')\n" },
      ],
      undefined,
    ],
    ['/tmp is a link to the host victim', [{ name: 'tmp', type: 'symlink', link: '/var/tmp' }], undefined],
    ['/proc is a link to /tmp', [{ name: 'proc', type: 'symlink', link: 'tmp' }], undefined],
    ['/dev is a link', [{ name: 'dev', type: 'symlink', link: '/tmp' }], undefined],
    ['/tmp is a file', [{ name: 'tmp', data: 'x' }], undefined],
    ['the working directory is a link out of the image', [{ name: 'wd', type: 'symlink', link: '/var/tmp' }], '/wd'],
    ["the working directory is raas's tool server", [], '/.raas/tool-server'],
    ['the working directory is /proc/self/root', [], '/proc/self/root'],
    ['the working directory climbs', [], '/../../../var/tmp'],
    ['the working directory is a file', [{ name: 'wdf', data: 'x' }], '/wdf'],
  ];

  it.each(cases)('%s: refused with an error, or the sandbox is ours and confined', async (name, layer, workdir) => {
    const layout = ociLayout(path.join(base, `oci-mnt-${hex(4)}`), [baseTar, ...(layer.length ? [layer] : [])], workdir ? { workdir } : {});
    let outcome: string;
    let seen: string | undefined;
    try {
      const sb = await rt.open({ rootImage: { ref: layout } });
      try {
        seen = (await sb.exec(['sh', '-c', 'ls /.raas; cat /tmp/raas-hijack-node 2>&1; touch ./rt-written 2>&1; pwd'])).stdout;
        outcome = `opened: ${seen.replace(/\n/g, ' | ')}`;
      } finally {
        await sb.close();
      }
    } catch (e) {
      outcome = `refused: ${(e as Error).message.slice(0, 240)}`;
      expect((e as { code?: string }).code, `${name}: ${outcome}`).toMatch(
        /^(invalid_instance|sandbox_error|sandbox_unavailable|bad_request)$/,
      );
    }
    if (seen !== undefined) {
      // The tool server is ours (the image's /.raas is hidden under ours), and no fake one ran.
      expect(seen, name).toMatch(/^lib\ntool-server\n/);
      expect(seen, name).toMatch(/raas-hijack-node'?: No such file/);
    }
    console.info(`[observed] ${name}: ${outcome}`);
    expectPlantedUnchanged(before, secrets);
    expect(fs.existsSync('/var/tmp/rt-written'), name).toBe(false);
  });
});

describe('an image-rooted sandbox against the host, other sandboxes and the kernel', () => {
  it('reaches no host file, no host port, no other sandbox, no user namespace', async () => {
    const canary = await hostServer();
    let hits = 0;
    const probe = await import('node:http').then(
      (http) =>
        new Promise<{ port: number; close: () => void }>((resolve) => {
          const s = http.createServer((_q, res) => {
            hits++;
            res.end('ok');
          });
          s.listen(0, '0.0.0.0', () => resolve({ port: (s.address() as { port: number }).port, close: () => s.close() }));
        }),
    );
    const hostIps = Object.values(os.networkInterfaces())
      .flat()
      .filter((i) => i && i.family === 'IPv4' && !i.internal)
      .map((i) => i!.address);
    const a = await rt.open({ rootImage: { ref: bb } });
    const b = await rt.open({ rootImage: { ref: bb } });
    try {
      const mark = `RTIMG${hex(8)}`;
      const sv = Object.values(secrets.values);
      const script = [
        ...[secrets.files.varTmpSecret, secrets.files.tmpSecret, secrets.files.rootSecret, '/etc/shadow'].map((f) => `cat ${f} 2>&1`),
        ...['127.0.0.1', ...hostIps].flatMap((ip) =>
          [probe.port, canary.port].map((port) => `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 2 ${ip} ${port} 2>&1; echo nc=$?`),
        ),
        'unshare -U -r true 2>&1; echo unshare=$?',
        'unshare -m true 2>&1; echo unshare_m=$?',
        'grep -o \'lowerdir=[^,]*\' /proc/self/mountinfo | head -1 | cut -d= -f2 | while read d; do ls "$d" 2>&1 | head -2; done',
        'cat /proc/1/environ 2>&1 | tr "\\0" " "',
        `echo ${mark} > /tmp/m; echo ${mark} > /etc/m; echo ${mark} > ./m; echo ${mark} > /dev/shm/m 2>/dev/null; true`,
      ].join('; ');
      const r = await a.exec(['sh', '-c', script]);
      console.info(`[observed] image sandbox vs host: ${r.stdout.replace(/\s+/g, ' ').slice(0, 600)}`);
      expect(
        sv.filter((v) => r.stdout.includes(v)),
        'host secrets read',
      ).toEqual([]);
      expect(r.stdout).toMatch(/unshare=1/);
      expect(hits, 'a host port was reached').toBe(0);
      const seen = await b.exec(['sh', '-c', `grep -rl ${mark} /etc /tmp /dev/shm /bin /testbed /workspace . 2>/dev/null; true`]);
      expect(seen.stdout.trim(), 'another sandbox saw the marker').toBe('');
    } finally {
      await a.close();
      await b.close();
      probe.close();
      await canary.close();
    }
    expectPlantedUnchanged(before, secrets);
  });
});

describe('the cache: concurrent first use and a compression bomb', () => {
  it('converts an image once when six sandboxes and a second store (another server) ask for it at once', async () => {
    const layout = ociLayout(path.join(base, `oci-race-${hex(4)}`), [baseTar, [{ name: `etc/race-${hex(4)}`, data: 'x' }]]);
    const rt2 = createSandboxRuntime({ runtime: 'bwrap', root: `${sbRoot}-2`, image_roots: { cache_dir: cacheDir, budget_gb: 2 } });
    try {
      const c0 = rt.roots.store().stats().conversions + rt2.roots.store().stats().conversions;
      const opened = await Promise.allSettled([
        ...Array.from({ length: 6 }, () => rt.open({ rootImage: { ref: layout } })),
        ...Array.from({ length: 3 }, () => rt2.roots.store().resolve(layout)),
      ]);
      const failed = opened.filter((o) => o.status === 'rejected').map((o) => String((o as PromiseRejectedResult).reason));
      for (const o of opened) if (o.status === 'fulfilled' && 'close' in o.value) await o.value.close();
      expect(failed).toEqual([]);
      expect(rt.roots.store().stats().conversions + rt2.roots.store().stats().conversions - c0).toBe(1);
    } finally {
      await rt2.close();
      fs.rmSync(`${sbRoot}-2`, { recursive: true, force: true });
    }
  });

  it("stops a layer that unpacks past the cache's budget, and leaves nothing of it on disk", async () => {
    const small = path.join(base, 'cache-small');
    const rt3 = createSandboxRuntime({ runtime: 'bwrap', root: `${sbRoot}-3`, image_roots: { cache_dir: small, budget_gb: 0.05 } });
    const work = path.join(base, 'bomb');
    fs.mkdirSync(work);
    try {
      // 200 MiB of zeros: a tar of that compresses to about 200 KiB in the layout.
      execFileSync('dd', ['if=/dev/zero', `of=${path.join(work, 'zeros')}`, 'bs=1M', 'count=200'], { stdio: 'ignore' });
      const tar = path.join(base, 'bomb.tar');
      execFileSync('tar', ['-C', work, '-cf', tar, 'zeros']);
      fs.rmSync(work, { recursive: true, force: true });
      const layout = ociLayout(path.join(base, 'oci-bomb'), [baseTar, tar]);
      fs.rmSync(tar, { force: true });
      const err = await rt3.roots
        .store()
        .resolve(layout)
        .then(
          () => undefined,
          (e: Error) => e,
        );
      expect(err?.message).toMatch(/budget/);
      const left = spawnSync('du', ['-sb', small], { encoding: 'utf8' }).stdout.split('\t')[0];
      expect(Number(left), 'bytes left in the cache').toBeLessThan(1 << 20);
    } finally {
      await rt3.close();
      fs.rmSync(`${sbRoot}-3`, { recursive: true, force: true });
    }
  }, 120_000);
});

describe('after every attack', () => {
  it('no process of an image sandbox is left', async () => {
    expect((await waitGone(() => watch.leftovers(), 10_000)).map((p) => `${p.pid} ${p.cmd.slice(0, 100)}`)).toEqual([]);
  });
});
