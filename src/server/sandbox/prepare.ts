import { createHash, randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { RaasError } from '../../protocol/errors.js';

/**
 * Installs the tool server under `<root>/tool-server/<hash>/`: the compiled JavaScript of
 * src/server/tools plus node-pty (package.json, lib, pty.node), world-readable, so the sandbox user
 * can run it wherever the repository was cloned (CI clones as root into a folder that user cannot
 * read). Content-addressed, so a rebuild never changes files under a running sandbox.
 */
export function installToolServer(root: string): string {
  const files = readSources();
  const h = createHash('sha256');
  for (const [f, buf] of files) h.update(f).update(buf);
  const dir = path.join(root, 'tool-server', h.digest('hex').slice(0, 16));
  if (fs.existsSync(path.join(dir, 'main.js'))) return dir;

  const tmp = `${dir}.tmp-${process.pid}-${randomBytes(3).toString('hex')}`;
  fs.mkdirSync(tmp, { recursive: true, mode: 0o755 });
  // Written from the bytes that were hashed, so the directory always matches its name.
  for (const [f, buf] of files) write(path.join(tmp, f), buf, f.endsWith('.node') ? 0o755 : 0o644);
  try {
    fs.renameSync(tmp, dir);
  } catch {
    // Another process installed the same content first.
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return dir;
}

/**
 * The files of the install, relative path → bytes. A build running at the same moment (tsc rewrites
 * dist/ in place) can leave a file empty for an instant: re-read until none is.
 */
function readSources(): Array<[string, Buffer]> {
  const src = compiledToolsDir();
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
    for (const f of fs.readdirSync(src).filter((n) => n.endsWith('.js')).sort()) out.push([f, fs.readFileSync(path.join(src, f))]);
    out.push(['package.json', Buffer.from(JSON.stringify({ name: 'raas-tool-server', private: true, type: 'module' }) + '\n')]);
    for (const f of ptyFiles) out.push([path.join('node_modules/node-pty', f), fs.readFileSync(path.join(pty, f))]);
    if (out.every(([, b]) => b.length > 0) || attempt >= 20) return out;
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
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

/** dist/src/server/tools, whether this module runs compiled (dist) or from source (tsx, vitest). */
export function compiledToolsDir(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const candidates = [path.join(here, '../tools'), path.resolve(here, '../../../dist/src/server/tools')];
  for (const c of candidates) if (fs.existsSync(path.join(c, 'main.js'))) return c;
  throw new RaasError('sandbox_unavailable', `compiled tool server not found (looked in ${candidates.join(', ')}): run "npm run build"`, {
    retryable: false,
  });
}

function nodePtyDir(): string {
  try {
    return path.dirname(createRequire(import.meta.url).resolve('node-pty/package.json'));
  } catch (e) {
    throw new RaasError('sandbox_unavailable', 'node-pty is not installed: run "npm ci" (scripts/setup.sh)', { cause: e, retryable: false });
  }
}
