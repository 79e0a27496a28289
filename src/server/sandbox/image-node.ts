import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { RaasError } from '../../protocol/errors.js';
import { isRoot } from './host.js';
import { ensureDir } from './prepare.js';

/** Where the host's node, its loader and its libraries appear inside an image-rooted sandbox. */
export const IMAGE_LIB = '/.raas/lib';
/** The loader's name inside IMAGE_LIB (the patched node's interpreter). */
const LOADER = 'ld.so';
/** Bump when the install's content changes for the same host files. */
const LAYOUT = 'image-node-v2';
/** Files of the image glibc's loader would read on its own; blanked in our copy (same length, so no offset moves). */
const IMAGE_FILES = ['/etc/ld.so.preload', '/etc/ld.so.cache'];

/**
 * The loader with the names of IMAGE_FILES overwritten by a path that does not exist in any image
 * (`/.raas/lib/-…`, same length). Throws when a name is not in it exactly once: another loader
 * needs a look before it runs our tool server in a hostile image.
 */
function blankImagePaths(loader: Buffer, file: string): Buffer {
  const out = Buffer.from(loader);
  for (const name of IMAGE_FILES) {
    const needle = Buffer.from(`${name}\0`, 'latin1');
    const at = out.indexOf(needle);
    if (at < 0 || out.indexOf(needle, at + 1) >= 0) {
      throw new RaasError(
        'sandbox_unavailable',
        `the loader ${file} does not name ${name} exactly once; image-rooted sandboxes need a glibc loader`,
        {
          retryable: false,
        },
      );
    }
    const blank = `${IMAGE_LIB}/-`.padEnd(name.length, '-');
    out.write(blank, at, 'latin1');
  }
  return out;
}

/**
 * The host's node made to run in any image (glibc, musl, or no libc at all): a copy whose ELF
 * interpreter is the host's loader at IMAGE_LIB and whose DT_RPATH is IMAGE_LIB, beside the shared
 * libraries node and node-pty's addon need, copied from the host. The kernel loads it by exec, so
 * the copy stays execute-only (non-dumpable, as in host-rooted sandboxes), and nothing of the
 * image's own libraries is used or changed: the image's programs keep their own loader. DT_RPATH
 * (not RUNPATH) also covers the libraries' own dependencies and the addon's dlopen.
 *
 * The image must not reach into our process either: node is marked to skip the default library
 * directories and ld.so.cache (DF_1_NODEFLIB), and the copy of the loader reads neither the
 * image's /etc/ld.so.preload nor its /etc/ld.so.cache (their names are blanked in the copy), so a
 * library the image plants there is never loaded into the tool server.
 *
 * Installed once per node binary under `<root>/image-node/<key>/`; `patchelf` (Debian package)
 * does the rewrite.
 */
export function installImageNode(root: string, node: string, addons: string[]): string {
  const real = fs.realpathSync(node);
  const libs = new Map<string, string>();
  for (const bin of [real, ...addons]) for (const [name, p] of sharedLibs(bin)) libs.set(name, p);
  const h = createHash('sha256').update(`${LAYOUT}\0`);
  for (const f of [real, ...libs.values()]) {
    const st = fs.statSync(f);
    h.update(`${f}\0${st.size}\0${st.mtimeMs}\0`);
  }
  const dir = path.join(root, 'image-node', h.digest('hex').slice(0, 16));
  if (fs.existsSync(path.join(dir, 'node'))) return dir;
  ensureDir(path.dirname(dir));
  const tmp = `${dir}.tmp-${process.pid}-${randomBytes(3).toString('hex')}`;
  ensureDir(tmp);
  try {
    for (const [name, p] of libs) {
      if (name === LOADER) fs.writeFileSync(path.join(tmp, name), blankImagePaths(fs.readFileSync(p), p));
      else fs.copyFileSync(p, path.join(tmp, name));
      fs.chmodSync(path.join(tmp, name), 0o755);
    }
    const copy = path.join(tmp, 'node');
    fs.copyFileSync(real, copy);
    fs.chmodSync(copy, 0o755);
    try {
      execFileSync(
        'patchelf',
        ['--set-interpreter', `${IMAGE_LIB}/${LOADER}`, '--force-rpath', '--set-rpath', IMAGE_LIB, '--no-default-lib', copy],
        {
          stdio: ['ignore', 'ignore', 'pipe'],
        },
      );
    } catch (e) {
      const missing = (e as NodeJS.ErrnoException).code === 'ENOENT';
      throw new RaasError(
        'sandbox_unavailable',
        missing
          ? 'image-rooted sandboxes need patchelf to run the host node inside the image: apt-get install patchelf (scripts/setup.sh does)'
          : `patchelf could not rewrite ${real}: ${String((e as { stderr?: Buffer }).stderr ?? e).trim()}`,
        { cause: e, retryable: false },
      );
    }
    // Execute-only, as the host-rooted sandboxes' node (prepare.ts): the task cannot attach to it.
    fs.chmodSync(copy, isRoot() ? 0o711 : 0o111);
    fs.renameSync(tmp, dir);
  } catch (e) {
    fs.rmSync(tmp, { recursive: true, force: true });
    if (fs.existsSync(path.join(dir, 'node'))) return dir; // another process installed it first
    throw e;
  }
  return dir;
}

/** The shared libraries a binary loads on this host (name inside IMAGE_LIB → host path), loader included. */
function sharedLibs(bin: string): Array<[string, string]> {
  let out: string;
  try {
    out = execFileSync('ldd', [bin], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    // A static binary: ldd says so and exits non-zero; it needs nothing.
    if (/not a dynamic executable|statically linked/.test(String((e as { stdout?: string }).stdout ?? ''))) return [];
    throw new RaasError('sandbox_unavailable', `ldd ${bin} failed: ${(e as Error).message}`, { cause: e, retryable: false });
  }
  const libs: Array<[string, string]> = [];
  for (const line of out.split('\n')) {
    const linked = /^\s*(\S+)\s+=>\s+(\/\S+)\s+\(/.exec(line);
    if (linked) libs.push([linked[1]!, fs.realpathSync(linked[2]!)]);
    else {
      const loader = /^\s*(\/\S*ld-linux\S*)\s+\(/.exec(line);
      if (loader) libs.push([LOADER, fs.realpathSync(loader[1]!)]);
    }
  }
  return libs;
}
