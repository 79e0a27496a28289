// Real root filesystems for image-rooted sandboxes, built at test time from Debian packages and
// cached under .raas/fixtures/images (gitignored; CI keeps .raas/ between runs):
// - busybox: the busybox-static package's binary and its applet links, no libc, no node, no python;
// - debian: `mmdebstrap --variant=minbase` of bookworm from the host's apt sources with python3,
//   python3-pytest, git and patch inside (none of them is used from the host).
// Each is also derived into the other forms a user has: a .sif (mksquashfs, then a SIF container
// around it, sif-writer.ts), an OCI image layout (umoci, two layers, the second with a whiteout)
// and a `docker save` archive (skopeo, from that layout).
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { inImage } from '../../src/server/sandbox/image-paths.js';
import { acquireLock } from '../../src/server/sandbox/rootfs/lock.js';
import { writeSif } from './sif-writer.js';

const run = promisify(execFile);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** Where built images are kept between runs. */
export const IMAGE_CACHE = path.join(ROOT, '.raas/fixtures/images');
/** The environment every test image declares (OCI Env), and its working directory. */
export const IMAGE_ENV = { PATH: '/usr/local/bin:/usr/bin:/bin', RAAS_IMAGE_MARK: 'from-the-image' };
export const IMAGE_WORKDIR = '/testbed';
/** What the OCI layout's second layer does: removes this file of the first (a whiteout) and adds the other. */
export const WHITEOUT = { removed: 'bin/vi', added: 'etc/raas-layer-2' };

const DEBIAN_PACKAGES = ['python3', 'python3-pytest', 'git', 'patch'];
const BUSYBOX = '/bin/busybox';

/** Runs `fn` once per `name` across processes (vitest workers), caching its output under IMAGE_CACHE. */
async function cached(name: string, stamp: string, build: (out: string) => Promise<void>): Promise<string> {
  fs.mkdirSync(IMAGE_CACHE, { recursive: true });
  const out = path.join(IMAGE_CACHE, name);
  const stampFile = `${out}.stamp`;
  const fresh = (): boolean => fs.existsSync(out) && fs.existsSync(stampFile) && fs.readFileSync(stampFile, 'utf8') === stamp;
  if (fresh()) return out;
  const release = await acquireLock(path.join(IMAGE_CACHE, `.${name}.lock`));
  try {
    if (fresh()) return out;
    fs.rmSync(out, { recursive: true, force: true });
    fs.rmSync(stampFile, { force: true });
    const tmp = `${out}.tmp-${process.pid}`;
    fs.rmSync(tmp, { recursive: true, force: true });
    try {
      await build(tmp);
      fs.renameSync(tmp, out);
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
    fs.writeFileSync(stampFile, stamp);
    return out;
  } finally {
    release();
  }
}

const sha = (s: string | Buffer): string => createHash('sha256').update(s).digest('hex').slice(0, 16);

/** What a derived form's stamp depends on: its source's own stamp when it is a cached image, else the source's path and mtime. */
function sourceStamp(src: string): string {
  const st = fs.statSync(fs.existsSync(`${src}.stamp`) ? `${src}.stamp` : src);
  return `${src} ${st.mtimeMs}`;
}

/** A root directory holding only busybox (statically linked) and its applet links. */
export function busyboxImage(): Promise<string> {
  const bin = fs.readFileSync(BUSYBOX);
  return cached('busybox', `busybox ${sha(bin)} v1`, async (out) => {
    for (const d of ['bin', 'etc', 'tmp', 'testbed']) fs.mkdirSync(path.join(out, d), { recursive: true, mode: 0o755 });
    fs.chmodSync(path.join(out, 'tmp'), 0o1777);
    fs.copyFileSync(BUSYBOX, path.join(out, 'bin/busybox'));
    fs.chmodSync(path.join(out, 'bin/busybox'), 0o755);
    const { stdout } = await run(BUSYBOX, ['--list']);
    for (const applet of stdout.split('\n').filter((a) => /^[\w.[-]+$/.test(a) && a !== 'busybox')) {
      fs.symlinkSync('busybox', path.join(out, 'bin', applet));
    }
    fs.writeFileSync(path.join(out, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
    fs.writeFileSync(path.join(out, 'testbed/README'), 'busybox test image\n');
  });
}

/** The host's apt sources (a deb822 file mmdebstrap reads as its mirror), if it has them in that form. */
function aptSources(): string | undefined {
  const f = '/etc/apt/sources.list.d/debian.sources';
  return fs.existsSync(f) ? f : undefined;
}

/**
 * Debian 12 minbase with python3, python3-pytest, git and patch (mmdebstrap, about 30–90 s on two
 * cores; about 300 MB unpacked), from the mirror the host's apt uses.
 */
export function debianImage(): Promise<string> {
  const sources = aptSources();
  const stamp = JSON.stringify({
    packages: DEBIAN_PACKAGES,
    suite: 'bookworm',
    sources: sources ? sha(fs.readFileSync(sources)) : null,
    v: 1,
  });
  return cached('debian', stamp, async (out) => {
    await run(
      'mmdebstrap',
      [
        '--variant=minbase',
        '--mode=auto',
        '--format=directory',
        `--include=${DEBIAN_PACKAGES.join(',')}`,
        'bookworm',
        out,
        ...(sources ? [sources] : []),
      ],
      { maxBuffer: 64 << 20, timeout: 900_000 },
    );
    fs.mkdirSync(path.join(out, IMAGE_WORKDIR.slice(1)), { recursive: true, mode: 0o755 });
  });
}

/**
 * The environment script `apptainer build` writes into a SIF made from a Docker image:
 * `export PATH="…"`, every other variable as `export NAME="${NAME:-"…"}"`, values escaped for double
 * quotes (apptainer conveyorPacker_oci.go@917d6657:388-414, shell/escape.go@917d6657:25-31).
 */
export function docker2singularityEnv(env: Record<string, string>): string {
  const esc = (v: string): string => v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/`/g, '\\`').replace(/\$/g, '\\$');
  const lines = Object.entries(env).map(([k, v]) => (k === 'PATH' ? `export ${k}="${esc(v)}"` : `export ${k}="\${${k}:-"${esc(v)}"}"`));
  return `#!/bin/sh\n${lines.join('\n')}\n`;
}

/**
 * `<name>.sif`: the tree as a zstd squashfs in a SIF container, with IMAGE_ENV in
 * /.singularity.d/env/10-docker2singularity.sh as `apptainer build docker://…` leaves it.
 */
export function sifOf(name: string, dir: string): Promise<string> {
  return cached(`${name}.sif`, `sif of ${sourceStamp(dir)} v2`, async (out) => {
    const sqfs = `${out}.sqfs`;
    const extra = `${out}.extra`;
    try {
      const envDir = path.join(extra, '.singularity.d/env');
      fs.mkdirSync(envDir, { recursive: true });
      fs.writeFileSync(path.join(envDir, '10-docker2singularity.sh'), docker2singularityEnv(IMAGE_ENV), { mode: 0o755 });
      const opts = { maxBuffer: 64 << 20, timeout: 900_000 };
      await run('mksquashfs', [dir, sqfs, '-noappend', '-comp', 'zstd', '-quiet', '-no-progress'], opts);
      // Appending one source directory adds its contents to the root.
      await run('mksquashfs', [extra, sqfs, '-quiet', '-no-progress'], opts);
      writeSif(sqfs, out);
    } finally {
      fs.rmSync(sqfs, { force: true });
      fs.rmSync(extra, { recursive: true, force: true });
    }
  });
}

/**
 * `<name>.oci`: an OCI image layout tagged `latest` with the tree as its first layer and a second
 * layer holding a whiteout of WHITEOUT.removed and the new file WHITEOUT.added; its config names
 * IMAGE_ENV and IMAGE_WORKDIR.
 */
export function ociOf(name: string, dir: string): Promise<string> {
  return cached(`${name}.oci`, `oci of ${sourceStamp(dir)} v2`, async (out) => {
    const work = `${out}.work`;
    fs.mkdirSync(work, { recursive: true });
    try {
      const image = `${out}:latest`;
      await run('umoci', ['init', '--layout', out]);
      await run('umoci', ['new', '--image', image]);
      const layer1 = path.join(work, 'layer1.tar');
      await run('tar', ['-C', dir, '--numeric-owner', '-cf', layer1, '.'], { maxBuffer: 64 << 20, timeout: 900_000 });
      await run('umoci', ['raw', 'add-layer', '--image', image, layer1], { timeout: 900_000 });
      const l2 = path.join(work, 'l2');
      // The whiteout goes where the file really is (a directory entry over a symlink such as merged
      // /usr's `bin -> usr/bin` would replace the link), and only when the image has the file.
      const parent = inImage(dir, path.dirname(WHITEOUT.removed));
      const real = parent && path.join(parent, path.basename(WHITEOUT.removed));
      if (real && fs.lstatSync(real, { throwIfNoEntry: false })) {
        const rel = path.relative(dir, real);
        const removed = path.join(l2, path.dirname(rel), `.wh.${path.basename(rel)}`);
        fs.mkdirSync(path.dirname(removed), { recursive: true });
        fs.writeFileSync(removed, '');
      }
      fs.mkdirSync(path.join(l2, path.dirname(WHITEOUT.added)), { recursive: true });
      fs.writeFileSync(path.join(l2, WHITEOUT.added), 'second layer\n');
      const layer2 = path.join(work, 'layer2.tar');
      await run('tar', ['-C', l2, '--numeric-owner', '-cf', layer2, '.']);
      await run('umoci', ['raw', 'add-layer', '--image', image, layer2]);
      const env = Object.entries(IMAGE_ENV).flatMap(([k, v]) => ['--config.env', `${k}=${v}`]);
      await run('umoci', ['config', '--image', image, ...env, '--config.workingdir', IMAGE_WORKDIR]);
      await run('umoci', ['gc', '--layout', out]);
    } finally {
      fs.rmSync(work, { recursive: true, force: true });
    }
  });
}

/** `<name>.tar`: `docker save`'s archive format of the OCI layout (skopeo), tagged raas/<name>:latest. */
export async function dockerArchiveOf(name: string, dir: string): Promise<string> {
  const layout = await ociOf(name, dir);
  return cached(`${name}.tar`, `docker-archive of ${sourceStamp(layout)} v1`, async (out) => {
    await run('skopeo', ['--insecure-policy', 'copy', '--quiet', `oci:${layout}:latest`, `docker-archive:${out}:raas/${name}:latest`], {
      maxBuffer: 64 << 20,
      timeout: 900_000,
    });
  });
}
