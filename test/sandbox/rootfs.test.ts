// The image store without sandboxes: SIF files read as the reference implementation writes them,
// every form detected by its content, and the cache (one conversion per source under concurrent
// first use, also across processes sharing the directory; corrupt and partial entries redone; LRU
// eviction under the budget, never of an entry in use; an image over the budget refused; what an
// image must not bring onto the host's disk removed). Images: test/helpers/images.ts.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RaasError } from '../../src/protocol/errors.js';
import { resolveIdentity } from '../../src/server/sandbox/host.js';
import { entryKey, entryPaths } from '../../src/server/sandbox/rootfs/cache.js';
import { detectImage, findImage } from '../../src/server/sandbox/rootfs/detect.js';
import { parseExport, singularityEnv } from '../../src/server/sandbox/rootfs/env.js';
import { RootfsStore, type Owner } from '../../src/server/sandbox/rootfs/index.js';
import { readSifPartition } from '../../src/server/sandbox/rootfs/sif.js';
import { busyboxImage, dockerArchiveOf, docker2singularityEnv, IMAGE_ENV, IMAGE_WORKDIR, ociOf, sifOf } from '../helpers/images.js';
import { writeSif } from '../helpers/sif-writer.js';
import { testRoot } from './helpers.js';

const IS_ROOT = process.getuid?.() === 0;
const root = testRoot('rootfs');
const id = IS_ROOT ? resolveIdentity('raas-sandbox') : undefined;
const owner: Owner = id ? { uid: id.uid, gid: id.gid } : { uid: process.getuid!(), gid: process.getgid!() };
let forms: { dir: string; sif: string; oci: string; tar: string };
let sqfs: string;
let n = 0;

/** A store over a fresh cache directory (or `dir`), budget in bytes. */
function store(budgetBytes = 1 << 30, cacheDir = path.join(root, `cache-${++n}`)): RootfsStore {
  return new RootfsStore({ cacheDir, budgetBytes, owner });
}

beforeAll(async () => {
  fs.mkdirSync(root, { recursive: true, mode: 0o755 });
  const dir = await busyboxImage();
  forms = { dir, sif: await sifOf('busybox', dir), oci: await ociOf('busybox', dir), tar: await dockerArchiveOf('busybox', dir) };
  sqfs = path.join(root, 'busybox.sqfs');
  execFileSync('mksquashfs', [dir, sqfs, '-noappend', '-quiet', '-no-progress']);
}, 120_000);

afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

describe('SIF files, read without Apptainer (layout of apptainer/sif@e306d8b1)', () => {
  it('finds the squashfs primary partition where the Go library puts it: after 48 descriptors at 4096, aligned to 4096', async () => {
    const f = path.join(root, 'plain.sif');
    writeSif(sqfs, f);
    // create.go@e306d8b1:315-316: descriptors at 4096, 48 of 585 bytes; the data starts at 32176 and
    // a partition at the next 4096 boundary (descriptor_input.go@e306d8b1:295-297).
    const p = await readSifPartition(f);
    expect(p).toEqual({ offset: 32768, size: fs.statSync(sqfs).size, arch: 'amd64' });
    expect(fs.readFileSync(f).subarray(32768, 32772).toString('latin1')).toBe('hsqs');
  });

  it('skips the objects before it (a definition file) and reads the partition where it lies', async () => {
    const f = path.join(root, 'deffile.sif');
    // A 1000-byte definition file, unaligned at 32176, pushes the partition to the next boundary but one.
    const def = Buffer.from('Bootstrap: docker\nFrom: busybox\n'.padEnd(1000, '#'));
    writeSif(sqfs, f, { before: [{ dataType: 0x4001, data: def, name: 'def' }] });
    const p = await readSifPartition(f);
    expect(p.offset).toBe(36864);
    expect(p.arch).toBe('amd64');
  });

  it('refuses what Apptainer would not mount as a root, naming why', async () => {
    const cases: Array<[string, (f: string) => void, RegExp]> = [
      ['ext3 primary partition', (f) => writeSif(sqfs, f, { fsType: 2 }), /primary partition is ext3, only plain squashfs/],
      [
        'no primary partition',
        (f) => writeSif(sqfs, f, { partType: 1 }),
        /no primary system partition \(partitions: squashfs \(part type 1\)\)/,
      ],
      [
        'another version',
        (f) => {
          writeSif(sqfs, f);
          const fd = fs.openSync(f, 'r+');
          fs.writeSync(fd, Buffer.from('02'), 0, 2, 42);
          fs.closeSync(fd);
        },
        /SIF version "02" is not supported/,
      ],
      [
        'truncated',
        (f) => {
          writeSif(sqfs, f);
          fs.truncateSync(f, 40_000);
        },
        /truncated SIF/,
      ],
      ['no magic', (f) => fs.writeFileSync(f, Buffer.alloc(4096)), /not a SIF file \(bad magic\)/],
    ];
    for (const [what, make, msg] of cases) {
      const f = path.join(root, `bad-${what.replace(/\W+/g, '-')}.sif`);
      make(f);
      await expect(readSifPartition(f), what).rejects.toMatchObject({ code: 'invalid_instance', message: expect.stringMatching(msg) });
    }
  });

  it('refuses a SIF built for another architecture before unpacking it', async () => {
    const f = path.join(root, 'arm.sif');
    writeSif(sqfs, f, { arch: 'arm64' });
    await expect(store().resolve(f)).rejects.toMatchObject({
      code: 'invalid_instance',
      message: expect.stringMatching(/built for arm64, this host is amd64/),
    });
  });
});

describe('image forms, told apart by content', () => {
  it('a directory, a SIF, an OCI layout (with its tag made explicit) and a docker save archive', () => {
    expect(detectImage(forms.dir)).toMatchObject({ form: 'directory', root: forms.dir });
    expect(detectImage(forms.sif)).toMatchObject({ form: 'sif' });
    expect(detectImage(forms.oci)).toMatchObject({ form: 'oci', tag: 'latest' });
    expect(detectImage(`${forms.oci}:latest`)).toMatchObject({ form: 'oci', tag: 'latest' });
    expect(detectImage(forms.tar)).toMatchObject({ form: 'docker-archive' });
  });

  it('a wrong one gets an error naming the path and what would work', () => {
    const exportTar = path.join(root, 'export.tar');
    execFileSync('tar', ['-C', forms.dir, '-cf', exportTar, 'etc']);
    const notSif = path.join(root, 'not.sif');
    fs.writeFileSync(notSif, 'hello');
    const empty = path.join(root, 'emptydir');
    fs.mkdirSync(empty, { recursive: true });
    const err = (ref: string): string => {
      try {
        detectImage(ref);
      } catch (e) {
        expect(e).toBeInstanceOf(RaasError);
        return (e as Error).message;
      }
      return 'no error';
    };
    expect(err(exportTar)).toMatch(/docker export.*tar -xpf/);
    expect(err(notSif)).toMatch(/not a SIF file.*apptainer build/);
    expect(err(empty)).toMatch(/not an image directory/);
    expect(err(path.join(root, 'missing'))).toMatch(/no such file or directory/);
    expect(err(`${forms.oci}:v9`)).toMatch(/no tag "v9" in the OCI layout \(tags: latest\)/);
  });

  it('findImage tries each name as a directory, <name>.sif, <name>_latest.sif and <name>.tar, and never leaves the directory', () => {
    const dir = path.join(root, 'images');
    fs.mkdirSync(dir, { recursive: true });
    fs.copyFileSync(forms.sif, path.join(dir, 'b_latest.sif'));
    expect(findImage(dir, ['a', 'b'])).toEqual({
      ref: path.join(dir, 'b_latest.sif'),
      tried: ['a', 'a.sif', 'a_latest.sif', 'a.tar', 'b', 'b.sif', 'b_latest.sif'].map((f) => path.join(dir, f)),
    });
    expect(findImage(dir, ['../images/b_latest', '..', '/etc']).ref).toBeUndefined();
  });
});

describe("Apptainer's environment scripts, read without running them", () => {
  it('takes the lines docker2singularity writes (apptainer conveyorPacker_oci.go@917d6657:388-414) and skips the rest', () => {
    const script = docker2singularityEnv({ PATH: '/opt/miniconda3/bin:/usr/bin', TZ: 'Etc/UTC', Q: 'a "b" $c `d`' });
    const env: Record<string, string> = {};
    for (const line of script.split('\n')) {
      const kv = parseExport(line, env);
      if (kv) env[kv[0]] = kv[1];
    }
    expect(env).toEqual({ PATH: '/opt/miniconda3/bin:/usr/bin', TZ: 'Etc/UTC', Q: 'a "b" $c `d`' });
    expect(parseExport('export X=$(id -u)', {})).toBeUndefined();
    expect(parseExport('export X="${HOME}/bin"', {})).toBeUndefined();
    expect(parseExport('export TZ="${TZ:-"UTC"}"', { TZ: 'Europe/Paris' })).toEqual(['TZ', 'Europe/Paris']);
  });

  it('reads /.singularity.d/env of a tree, never through a link out of it', () => {
    const tree = path.join(root, 'sing');
    fs.mkdirSync(path.join(tree, '.singularity.d/env'), { recursive: true });
    fs.writeFileSync(path.join(tree, '.singularity.d/env/10-docker2singularity.sh'), docker2singularityEnv(IMAGE_ENV));
    expect(singularityEnv(tree)).toEqual(IMAGE_ENV);
    const linked = path.join(root, 'sing-link');
    fs.mkdirSync(path.join(linked, '.singularity.d'), { recursive: true });
    fs.symlinkSync(path.join(tree, '.singularity.d/env'), path.join(linked, '.singularity.d/env'));
    expect(singularityEnv(linked)).toEqual({});
  });
});

describe('the image cache', () => {
  it('each form unpacks once into a tree owned by the sandbox user, with its environment', async () => {
    const s = store();
    const sif = await s.resolve(forms.sif);
    expect(sif).toMatchObject({ form: 'sif', env: IMAGE_ENV });
    const oci = await s.resolve(forms.oci);
    expect(oci).toMatchObject({ form: 'oci', env: IMAGE_ENV, workdir: IMAGE_WORKDIR });
    const tar = await s.resolve(forms.tar);
    expect(tar).toMatchObject({ form: 'docker-archive', env: IMAGE_ENV, workdir: IMAGE_WORKDIR });
    const dir = await s.resolve(forms.dir);
    expect(dir.form).toBe('directory');
    for (const img of [sif, oci, tar, dir]) {
      const st = fs.statSync(path.join(img.dir, 'bin/busybox'));
      expect([st.uid, st.gid]).toEqual([owner.uid, owner.gid]);
    }
    // The OCI layout's second layer removed one file of the first (a whiteout) and added another.
    expect(fs.existsSync(path.join(oci.dir, 'bin/vi'))).toBe(false);
    expect(fs.readFileSync(path.join(tar.dir, 'etc/raas-layer-2'), 'utf8')).toBe('second layer\n');
    expect(fs.lstatSync(path.join(sif.dir, 'bin/vi')).isSymbolicLink()).toBe(true);
    expect(s.stats()).toMatchObject({ conversions: IS_ROOT ? 4 : 3, entries: IS_ROOT ? 4 : 3 });
    await s.resolve(forms.oci);
    expect(s.stats().hits).toBe(1);
    await s.close();
  });

  it('concurrent first use converts once, here and in a second server sharing the directory', async () => {
    const a = store();
    const b = store(1 << 30, path.join(root, `cache-${n}`));
    const all = await Promise.all([a.resolve(forms.sif), a.resolve(forms.sif), b.resolve(forms.sif), b.resolve(forms.sif)]);
    expect(new Set(all.map((i) => i.dir)).size).toBe(1);
    expect(a.stats().conversions + b.stats().conversions).toBe(1);
    await Promise.all([a.close(), b.close()]);
  });

  it('a corrupt or partial entry is detected and redone', async () => {
    const s = store();
    const cacheDir = path.join(root, `cache-${n}`);
    const first = await s.resolve(forms.sif);
    const p = entryPaths(cacheDir, first.key!);
    fs.writeFileSync(p.complete, '{"env": 3');
    const again = store(1 << 30, cacheDir);
    await again.resolve(forms.sif);
    expect(again.stats().conversions).toBe(1);
    // A crash between unpacking and the record: a tree without complete.json.
    fs.rmSync(p.complete);
    const third = store(1 << 30, cacheDir);
    const img = await third.resolve(forms.sif);
    expect(third.stats().conversions).toBe(1);
    expect(fs.existsSync(path.join(img.dir, 'bin/busybox'))).toBe(true);
    await Promise.all([s.close(), again.close(), third.close()]);
  });

  it('evicts the least recently used entry past the budget, never one in use here or by another live process', async () => {
    const probe = store();
    const size = (await probe.resolve(forms.sif)).dir && probe.stats().bytes;
    await probe.close();
    const cacheDir = path.join(root, `cache-${++n}`);
    const s = store(Math.floor(size * 1.5), cacheDir);
    const a = await s.resolve(forms.sif);
    await s.resolve(forms.oci);
    expect(s.stats()).toMatchObject({ entries: 1, evictions: 1 });
    expect(fs.existsSync(a.dir)).toBe(false);
    // In use by a sandbox of this process: kept, over the budget.
    const b = await s.resolve(forms.oci);
    const release = s.retain(b);
    await s.resolve(forms.sif);
    expect(fs.existsSync(b.dir)).toBe(true);
    release();
    // In use by another process (its marker names a live pid): kept as well.
    const sleeper = spawn('sleep', ['30']);
    try {
      fs.writeFileSync(path.join(cacheDir, `.use-${b.key}-${sleeper.pid}`), `${sleeper.pid}\n`);
      await s.resolve(forms.tar);
      expect(fs.existsSync(b.dir)).toBe(true);
    } finally {
      sleeper.kill();
    }
    await s.close();
  });

  it('an image larger than the whole budget is refused and leaves nothing behind', async () => {
    const s = store(512 * 1024);
    const cacheDir = path.join(root, `cache-${n}`);
    await expect(s.resolve(forms.oci)).rejects.toMatchObject({
      code: 'invalid_instance',
      message: expect.stringMatching(/unpacks to .* MiB, .*the image cache's whole budget \(sandbox.image_roots.budget_gb\)/),
    });
    await s.close();
    expect(fs.readdirSync(cacheDir).filter((f) => !f.endsWith('.lock'))).toEqual([]);
  });

  it('an aborted conversion rejects with the reason and leaves no temporary tree', async () => {
    const s = store();
    const cacheDir = path.join(root, `cache-${n}`);
    const ac = new AbortController();
    const p = s.resolve(forms.tar, ac.signal);
    setTimeout(() => ac.abort(new Error('stop here')), 20);
    await expect(p).rejects.toThrow('stop here');
    await s.close();
    expect(fs.readdirSync(cacheDir).filter((f) => f.startsWith('.tmp-'))).toEqual([]);
  });

  it.skipIf(!IS_ROOT)('removes device nodes and setuid/setgid bits an image brings, and leaves the source alone', async () => {
    const src = path.join(root, 'hostile');
    execFileSync('cp', ['-a', forms.dir, src]);
    execFileSync('mknod', [path.join(src, 'disk'), 'b', '8', '0']);
    execFileSync('mknod', [path.join(src, 'mem'), 'c', '1', '1']);
    fs.copyFileSync(path.join(src, 'bin/busybox'), path.join(src, 'suid'));
    fs.chmodSync(path.join(src, 'suid'), 0o6755);
    execFileSync('mkfifo', [path.join(src, 'fifo')]);
    const s = store();
    const img = await s.resolve(src);
    expect(fs.existsSync(path.join(img.dir, 'disk'))).toBe(false);
    expect(fs.existsSync(path.join(img.dir, 'mem'))).toBe(false);
    expect(fs.statSync(path.join(img.dir, 'suid')).mode & 0o7777).toBe(0o755);
    expect(fs.lstatSync(path.join(img.dir, 'fifo')).isFIFO()).toBe(true);
    expect(fs.statSync(path.join(src, 'suid')).mode & 0o7777).toBe(0o6755);
    expect(fs.statSync(path.join(src, 'disk')).isBlockDevice()).toBe(true);
    await s.close();
  });

  it('the key follows the source: a changed file is a new entry; tags name their own', () => {
    const k = (ref: string): string => entryKey(detectImage(ref), owner);
    expect(k(forms.oci)).toBe(k(`${forms.oci}:latest`));
    const copy = path.join(root, 'copy.sif');
    fs.copyFileSync(forms.sif, copy);
    const before = k(copy);
    fs.appendFileSync(copy, 'x');
    expect(k(copy)).not.toBe(before);
  });
});
