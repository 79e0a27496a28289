import { createHash, randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { RaasError } from '../../protocol/errors.js';
import { isRoot } from './host.js';

/** Name of the execute-only node inside a tool-server install (`<install>/node`). */
export const SANDBOX_NODE = 'node';

/**
 * Installs the tool server under `<root>/tool-server/<hash>/`: src/server/tools bundled into one
 * CommonJS file (`main.js`) plus node-pty (package.json, lib, pty.node), world-readable, so the sandbox user
 * can run it wherever the repository was cloned (CI clones as root into a folder that user cannot
 * read). Content-addressed, so a rebuild never changes files under a running sandbox.
 *
 * With `opts.node`, the install also holds `node`: an execute-only copy of that binary (see
 * installExecOnlyNode). Start the tool server with it so code in the sandbox cannot attach to it.
 */
export function installToolServer(root: string, opts: { node?: string } = {}): string {
  const files = readSources();
  const h = createHash('sha256');
  for (const [f, buf] of files) h.update(f).update(buf);
  const node = opts.node ? installExecOnlyNode(root, opts.node) : undefined;
  if (node) h.update(SANDBOX_NODE).update(node);
  const dir = path.join(root, 'tool-server', h.digest('hex').slice(0, 16));
  if (fs.existsSync(path.join(dir, 'main.js'))) return dir;

  const tmp = `${dir}.tmp-${process.pid}-${randomBytes(3).toString('hex')}`;
  fs.mkdirSync(tmp, { recursive: true, mode: 0o755 });
  // Written from the bytes that were hashed, so the directory always matches its name.
  for (const [f, buf] of files) write(path.join(tmp, f), buf, f.endsWith('.node') ? 0o755 : 0o644);
  if (node) linkOrCopy(node, opts.node!, path.join(tmp, SANDBOX_NODE));
  try {
    fs.renameSync(tmp, dir);
  } catch {
    // Another process installed the same content first.
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return dir;
}

/**
 * Copies `node` to `<root>/node/<key>/node`, execute-only (0711 owned by root when the server runs
 * as root; 0111 otherwise, on a mount the sandbox sees read-only). A process that executes a file
 * it cannot read is made non-dumpable by the kernel, and its memory is owned by a user namespace
 * the sandbox has no capability in: other processes of the sandbox, though they run as the same
 * uid, cannot ptrace it, read /proc/<pid>/{mem,environ,fd}, or copy its descriptors with
 * pidfd_getfd. The key is the binary's real path, size and mtime; an unchanged binary is reused.
 */
function installExecOnlyNode(root: string, node: string): string {
  let real: string;
  let st: fs.Stats;
  try {
    real = fs.realpathSync(node);
    st = fs.statSync(real);
  } catch (e) {
    throw new RaasError('sandbox_unavailable', `node binary ${node} not found: set sandbox.node to an existing node binary`, {
      cause: e,
      retryable: false,
    });
  }
  const key = createHash('sha256').update(`${real}\0${st.size}\0${st.mtimeMs}`).digest('hex').slice(0, 16);
  const base = path.join(root, 'node');
  const dir = path.join(base, key);
  const target = path.join(dir, SANDBOX_NODE);
  // A script (a wrapper around node) needs its interpreter to read it: only a binary can be
  // execute-only. A wrapper's node is then dumpable; the seccomp filter still refuses ptrace,
  // process_vm_* and pidfd_getfd, and /proc/<pid>/mem stays open to the task (docs/security.md).
  const mode = isElf(real) ? (isRoot() ? 0o711 : 0o111) : 0o755;
  let stale = false;
  try {
    const have = fs.statSync(target);
    if (have.size === st.size && (have.mode & 0o7777) === mode) return target;
    stale = true;
  } catch {
    /* not installed yet */
  }
  ensureDir(base);
  const tmp = `${dir}.tmp-${process.pid}-${randomBytes(3).toString('hex')}`;
  try {
    ensureDir(tmp);
    fs.copyFileSync(real, path.join(tmp, SANDBOX_NODE));
    fs.chmodSync(path.join(tmp, SANDBOX_NODE), mode);
    // A running sandbox keeps its (unlinked) binary; only new sandboxes see the new one.
    if (stale) fs.rmSync(dir, { recursive: true, force: true });
    fs.renameSync(tmp, dir);
  } catch (e) {
    fs.rmSync(tmp, { recursive: true, force: true });
    // Another process installed the same binary first.
    if (fs.existsSync(target)) return target;
    throw new RaasError(
      'sandbox_unavailable',
      `cannot install the sandbox node under ${base}: ${(e as Error).message}; check that sandbox.root is writable`,
      { cause: e, retryable: false },
    );
  }
  return target;
}

/** True when the file starts with the ELF magic (a binary, not a script). */
function isElf(file: string): boolean {
  const fd = fs.openSync(file, 'r');
  try {
    const b = Buffer.alloc(4);
    fs.readSync(fd, b, 0, 4, 0);
    return b.equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46]));
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Hard-links the execute-only copy (no ~100 MB copy per tool-server build); where linking fails,
 * copies the original (the copy itself may be unreadable to us) with the same mode.
 */
function linkOrCopy(execOnly: string, original: string, to: string): void {
  try {
    fs.linkSync(execOnly, to);
  } catch {
    fs.copyFileSync(fs.realpathSync(original), to);
    fs.chmodSync(to, fs.statSync(execOnly).mode & 0o7777);
  }
}

/**
 * The files of the install, relative path → bytes: the bundled tool server (one CommonJS file, see
 * scripts/bundle-tools.mjs) and node-pty. A build running at the same moment (tsc rewrites dist/ in
 * place) can leave a file empty for an instant: re-read until none is.
 */
function readSources(): Array<[string, Buffer]> {
  const { bundle, compiled } = toolServerBuild();
  const pty = nodePtyDir();
  const ptyFiles = [
    'package.json',
    ...fs
      .readdirSync(path.join(pty, 'lib'), { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.js') && !f.endsWith('.test.js'))
      .map((f) => path.join('lib', f)),
    'build/Release/pty.node',
  ].sort();
  for (let attempt = 0; ; attempt++) {
    const out: Array<[string, Buffer]> = [];
    for (const f of ['main.js', 'package.json']) out.push([f, fs.readFileSync(path.join(bundle, f))]);
    for (const f of ptyFiles) out.push([path.join('node_modules/node-pty', f), fs.readFileSync(path.join(pty, f))]);
    if (out.every(([, b]) => b.length > 0) || attempt >= 20) {
      checkBundleFresh(bundle, compiled);
      return out;
    }
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
  }
}

/**
 * Refuses a bundle made from other compiled files than those in dist/ now (tsc ran without the
 * bundling step of `npm run build`): the sandboxes would run old tool-server code.
 */
export function checkBundleFresh(bundle: string, compiled: string): void {
  const h = createHash('sha256');
  for (const f of fs
    .readdirSync(compiled)
    .filter((n) => n.endsWith('.js'))
    .sort())
    h.update(f)
      .update('\0')
      .update(fs.readFileSync(path.join(compiled, f)));
  let recorded = '';
  try {
    recorded = fs.readFileSync(path.join(bundle, 'sources.sha256'), 'utf8').trim();
  } catch {
    /* reported below */
  }
  if (recorded !== h.digest('hex')) {
    throw new RaasError(
      'sandbox_unavailable',
      `the bundled tool server ${path.join(bundle, 'main.js')} was not built from the compiled files in ${compiled} (tsc ran without the bundling step): run "npm run build"`,
      { retryable: false },
    );
  }
}

function write(to: string, buf: Buffer, mode: number): void {
  fs.mkdirSync(path.dirname(to), { recursive: true, mode: 0o755 });
  fs.writeFileSync(to, buf, { mode });
  fs.chmodSync(to, mode);
}

/** Makes the directories on the path to `dir` traversable (o+x) so the sandbox user reaches it. */
export function ensureDir(dir: string, mode = 0o755): void {
  fs.mkdirSync(dir, { recursive: true, mode });
  fs.chmodSync(dir, mode);
}

/**
 * dist/tool-server (the bundle) and dist/src/server/tools (what it was made from), whether this module
 * runs compiled (dist) or from source (tsx, vitest).
 */
function toolServerBuild(): { bundle: string; compiled: string } {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const candidates = [path.resolve(here, '../../..'), path.resolve(here, '../../../dist')];
  for (const dist of candidates) {
    const bundle = path.join(dist, 'tool-server');
    if (fs.existsSync(path.join(bundle, 'main.js'))) return { bundle, compiled: path.join(dist, 'src/server/tools') };
  }
  throw new RaasError(
    'sandbox_unavailable',
    `bundled tool server not found (looked in ${candidates.map((c) => path.join(c, 'tool-server')).join(', ')}): run "npm run build"`,
    { retryable: false },
  );
}

function nodePtyDir(): string {
  try {
    return path.dirname(createRequire(import.meta.url).resolve('node-pty/package.json'));
  } catch (e) {
    throw new RaasError('sandbox_unavailable', 'node-pty is not installed: run "npm ci" (scripts/setup.sh)', {
      cause: e,
      retryable: false,
    });
  }
}
