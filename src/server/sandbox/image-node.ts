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

/**
 * The host's node made to run in any image (glibc, musl, or no libc at all): a copy whose ELF
 * interpreter is the host's loader at IMAGE_LIB and whose DT_RPATH is IMAGE_LIB, beside the shared
 * libraries node and node-pty's addon need, copied from the host. The kernel loads it by exec, so
 * the copy stays execute-only (non-dumpable, as in host-rooted sandboxes), and nothing of the
 * image's own libraries is used or changed: the image's programs keep their own loader. DT_RPATH
 * (not RUNPATH) also covers the libraries' own dependencies and the addon's dlopen.
 *
 * Installed once per node binary under `<root>/image-node/<key>/`; `patchelf` (Debian package)
 * does the rewrite.
 */
export function installImageNode(root: string, node: string, addons: string[]): string {
  const real = fs.realpathSync(node);
  const libs = new Map<string, string>();
  for (const bin of [real, ...addons]) for (const [name, p] of sharedLibs(bin)) libs.set(name, p);
  const h = createHash('sha256');
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
      fs.copyFileSync(p, path.join(tmp, name));
      fs.chmodSync(path.join(tmp, name), 0o755);
    }
    const copy = path.join(tmp, 'node');
    fs.copyFileSync(real, copy);
    fs.chmodSync(copy, 0o755);
    try {
      execFileSync('patchelf', ['--set-interpreter', `${IMAGE_LIB}/${LOADER}`, '--force-rpath', '--set-rpath', IMAGE_LIB, copy], {
        stdio: ['ignore', 'ignore', 'pipe'],
      });
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

/**
 * A path inside an image's root, resolved as the sandbox would see it: absolute symlinks re-rooted
 * at `root`, never leaving it. Undefined when nothing is there.
 */
export function inImage(root: string, p: string): string | undefined {
  let parts = p.split('/').filter(Boolean);
  let cur = root;
  for (let hops = 0; parts.length; ) {
    const name = parts.shift()!;
    if (name === '.') continue;
    const next = name === '..' ? (cur === root ? root : path.dirname(cur)) : path.join(cur, name);
    let st: fs.Stats;
    try {
      st = fs.lstatSync(next);
    } catch {
      return undefined;
    }
    if (st.isSymbolicLink()) {
      if (++hops > 40) return undefined;
      const target = fs.readlinkSync(next);
      parts = [...target.split('/').filter(Boolean), ...parts];
      if (target.startsWith('/')) cur = root;
      continue;
    }
    cur = next;
  }
  return cur;
}
