// What a reference points at, decided by content: a SIF header, a tar holding manifest.json
// (docker save), an OCI layout, an OCI runtime bundle, or an unpacked root tree.
import fs from 'node:fs';
import path from 'node:path';
import { RaasError } from '../../../protocol/errors.js';
import { isOciLayout, selectTag } from './oci.js';
import { isSif } from './sif.js';
import type { RootfsForm } from './types.js';

/** A resolved reference: its form and real path, plus what each form needs. */
export interface ImageSource {
  form: RootfsForm;
  /** The real path of the file or directory. */
  path: string;
  /** The tag of `path:tag` (OCI layouts, docker archives). */
  tag?: string;
  /** Directory form: the root tree (the path itself, or `rootfs/` of a bundle). */
  root?: string;
  /** Directory form: the bundle's config.json, when it is an OCI runtime bundle. */
  bundleConfig?: string;
}

function bad(ref: string, why: string): RaasError {
  return new RaasError('invalid_instance', `rootfs image ${ref}: ${why}`, { retryable: false });
}

function exists(p: string): boolean {
  try {
    fs.statSync(p);
    return true;
  } catch {
    return false;
  }
}

/** Splits `path:tag` at the first ':' whose left side exists (paths may contain ':' too). */
function splitRef(ref: string): { file: string; tag?: string } {
  const abs = path.resolve(ref);
  if (exists(abs)) return { file: abs };
  for (let i = ref.indexOf(':'); i > 0; i = ref.indexOf(':', i + 1)) {
    const left = path.resolve(ref.slice(0, i));
    if (exists(left) && i + 1 < ref.length) return { file: left, tag: ref.slice(i + 1) };
  }
  return { file: abs };
}

/** Reads the tar headers of `file` looking for a top-level manifest.json (docker save's index). */
function tarHasManifest(fd: number, size: number): boolean {
  const h = Buffer.alloc(512);
  for (let off = 0, n = 0; off + 512 <= size && n < 1_000_000; n++) {
    if (fs.readSync(fd, h, 0, 512, off) < 512 || h.every((b) => b === 0)) return false;
    const name = h.toString('utf8', 0, 100).replace(/\0.*$/s, '');
    const prefix = h.toString('utf8', 345, 500).replace(/\0.*$/s, '');
    const full = (prefix ? `${prefix}/${name}` : name).replace(/^\.\//, '');
    if (full === 'manifest.json') return true;
    // Size: 12 octal digits, or base-256 (high bit set) for members of 8 GiB and more.
    let len: number;
    if (h[124] & 0x80) len = Number(h.readBigUInt64BE(128 + 4));
    else len = Number.parseInt(h.toString('latin1', 124, 136).replace(/[\0 ]/g, '') || '0', 8);
    if (!Number.isFinite(len)) return false;
    off += 512 + Math.ceil(len / 512) * 512;
  }
  return false;
}

function detectFile(ref: string, file: string, tag: string | undefined): ImageSource {
  const fd = fs.openSync(file, 'r');
  try {
    const size = fs.fstatSync(fd).size;
    const head = Buffer.alloc(512);
    const n = fs.readSync(fd, head, 0, 512, 0);
    if (isSif(head.subarray(0, n))) {
      if (tag !== undefined) throw bad(ref, 'a SIF file has no tags; drop the ":<tag>"');
      return { form: 'sif', path: file };
    }
    if (file.endsWith('.sif')) throw bad(ref, 'not a SIF file (bad magic); rebuild it with `apptainer build` or `apptainer pull`');
    if (n === 512 && head.toString('latin1', 257, 262) === 'ustar') {
      if (tarHasManifest(fd, size)) return { form: 'docker-archive', path: file, tag };
      throw bad(
        ref,
        'a tar without manifest.json is not a `docker save` archive (a `docker export` tarball: unpack it with `tar -xpf` into a directory)',
      );
    }
    throw bad(ref, 'not an image: expected a SIF file, a `docker save` tar, an OCI layout or an unpacked root directory');
  } finally {
    fs.closeSync(fd);
  }
}

function detectDir(ref: string, dir: string, tag: string | undefined): ImageSource {
  // The tag is made explicit here, so `layout` and `layout:latest` share one cache entry.
  if (isOciLayout(dir)) return { form: 'oci', path: dir, tag: selectTag(dir, tag) };
  if (tag !== undefined) throw bad(ref, 'only OCI layouts and docker archives have tags; drop the ":<tag>"');
  const bundleRoot = path.join(dir, 'rootfs');
  const bundleConfig = path.join(dir, 'config.json');
  if (fs.existsSync(bundleConfig) && fs.statSync(bundleRoot, { throwIfNoEntry: false })?.isDirectory()) {
    return { form: 'directory', path: dir, root: bundleRoot, bundleConfig };
  }
  const names = new Set(fs.readdirSync(dir));
  if (['bin', 'usr', 'etc', '.singularity.d'].some((n) => names.has(n))) return { form: 'directory', path: dir, root: dir };
  throw bad(
    ref,
    'not an image directory: it has no oci-layout + index.json (OCI layout), no rootfs/ + config.json (OCI bundle) and no bin/, usr/ or etc/ (an unpacked root)',
  );
}

/** Detects the form of `ref` (a host path, optionally `path:tag`). Throws RaasError('invalid_instance') naming the path. */
export function detectImage(ref: string): ImageSource {
  const { file, tag } = splitRef(ref);
  let real: string;
  try {
    real = fs.realpathSync(file);
  } catch {
    throw bad(ref, 'no such file or directory; check the image directory and the instance id');
  }
  const st = fs.statSync(real);
  try {
    if (st.isDirectory()) return detectDir(ref, real, tag);
    if (st.isFile()) return detectFile(ref, real, tag);
  } catch (e) {
    if (e instanceof RaasError) throw e;
    throw bad(ref, `cannot read it: ${(e as Error).message}`);
  }
  throw bad(ref, 'not a regular file or directory');
}

/**
 * The first existing image for an instance under `dir`, trying `names` with each suffix form:
 * `<name>` directory (unpacked root, bundle or OCI layout), `<name>.sif`, `<name>_latest.sif`
 * (apptainer pull's name), `<name>.tar` (docker save); a name `<file>:<tag>` is a tag of the OCI
 * layout or docker archive `<file>`. Returns the path or undefined plus the list of paths tried
 * (for error messages).
 */
export function findImage(dir: string, names: string[]): { ref?: string; tried: string[] } {
  const tried: string[] = [];
  for (const name of names) {
    const colon = name.lastIndexOf(':');
    const file = colon > 0 ? name.slice(0, colon) : name;
    const tag = colon > 0 ? name.slice(colon + 1) : undefined;
    // Names come from instance ids: one that is not a plain file name must not reach outside `dir`.
    if (!file || file === '.' || file === '..' || /[/\0]/.test(file) || (tag !== undefined && !/^[\w][\w.-]{0,127}$/.test(tag))) continue;
    if (tag !== undefined) {
      const p = path.join(dir, file);
      tried.push(`${p}:${tag}`);
      const st = fs.statSync(p, { throwIfNoEntry: false });
      if (st && ((st.isDirectory() && isOciLayout(p)) || st.isFile())) return { ref: `${p}:${tag}`, tried };
      continue;
    }
    const forms: Array<[string, 'dir' | 'file']> = [
      [name, 'dir'],
      [`${name}.sif`, 'file'],
      [`${name}_latest.sif`, 'file'],
      [`${name}.tar`, 'file'],
    ];
    for (const [f, kind] of forms) {
      const p = path.join(dir, f);
      tried.push(p);
      const st = fs.statSync(p, { throwIfNoEntry: false });
      if (st && (kind === 'dir' ? st.isDirectory() : st.isFile())) return { ref: p, tried };
    }
  }
  return { tried };
}
