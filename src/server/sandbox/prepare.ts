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
  const src = compiledToolsDir();
  const pty = nodePtyDir();
  const files = fs.readdirSync(src).filter((f) => f.endsWith('.js')).sort();
  const ptyFiles = [
    'package.json',
    ...fs
      .readdirSync(path.join(pty, 'lib'), { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.js') && !f.endsWith('.test.js'))
      .map((f) => path.join('lib', f)),
    'build/Release/pty.node',
  ].sort();
  const h = createHash('sha256');
  for (const f of files) h.update(f).update(fs.readFileSync(path.join(src, f)));
  for (const f of ptyFiles) h.update(f).update(fs.readFileSync(path.join(pty, f)));
  const dir = path.join(root, 'tool-server', h.digest('hex').slice(0, 16));
  if (fs.existsSync(path.join(dir, 'main.js'))) return dir;

  const tmp = `${dir}.tmp-${process.pid}-${randomBytes(3).toString('hex')}`;
  fs.mkdirSync(tmp, { recursive: true, mode: 0o755 });
  for (const f of files) copy(path.join(src, f), path.join(tmp, f));
  fs.writeFileSync(path.join(tmp, 'package.json'), JSON.stringify({ name: 'raas-tool-server', private: true, type: 'module' }) + '\n', { mode: 0o644 });
  for (const f of ptyFiles) copy(path.join(pty, f), path.join(tmp, 'node_modules/node-pty', f));
  fs.chmodSync(path.join(tmp, 'node_modules/node-pty/build/Release/pty.node'), 0o755);
  try {
    fs.renameSync(tmp, dir);
  } catch {
    // Another process installed the same content first.
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return dir;
}

function copy(from: string, to: string): void {
  fs.mkdirSync(path.dirname(to), { recursive: true, mode: 0o755 });
  fs.copyFileSync(from, to);
  fs.chmodSync(to, 0o644);
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
