import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { RaasError } from '../../protocol/errors.js';

/** The uid/gid sandboxes run as, or undefined to run as the server's own user. */
export interface SandboxIdentity {
  uid: number;
  gid: number;
  name: string;
}

/** True when the server runs as root (the case that needs a sandbox user). */
export function isRoot(): boolean {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

/** `sandbox.root` default: /var/tmp/raas as root, `<tmpdir>/raas-<uid>` otherwise. */
export function defaultRoot(): string {
  return isRoot() ? '/var/tmp/raas' : path.join(os.tmpdir(), `raas-${process.getuid?.() ?? 'user'}`);
}

/** Finds an executable on PATH (or checks an absolute path). */
export function findBinary(name: string): string | undefined {
  if (name.includes('/')) return isExecutable(name) ? name : undefined;
  for (const dir of (process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin').split(':')) {
    if (!dir) continue;
    const p = path.join(dir, name);
    if (isExecutable(p)) return p;
  }
  return undefined;
}

function isExecutable(p: string): boolean {
  try {
    fs.accessSync(p, fs.constants.X_OK);
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

/**
 * The identity bwrap runs as. As root: the configured sandbox user, never root itself (a sandbox
 * started as root is uid 0 with full capabilities inside). Unprivileged: undefined (our own uid).
 */
export function resolveIdentity(user: string): SandboxIdentity | undefined {
  if (!isRoot()) return undefined;
  const uid = idOf(user, '-u');
  const gid = idOf(user, '-g');
  if (uid === undefined || gid === undefined) {
    throw new RaasError(
      'sandbox_unavailable',
      `sandbox.user "${user}" does not exist, and the server runs as root, so bwrap cannot drop privileges: ` +
        `run scripts/setup.sh (it creates the user), or "useradd --system --no-create-home --shell /usr/sbin/nologin ${user}", ` +
        'or set sandbox.user to an existing unprivileged user, or run the server as a non-root user',
      { retryable: false },
    );
  }
  if (uid === 0) {
    throw new RaasError(
      'sandbox_unavailable',
      `sandbox.user "${user}" is uid 0: choose an unprivileged user (scripts/setup.sh creates raas-sandbox)`,
      {
        retryable: false,
      },
    );
  }
  return { uid, gid, name: user };
}

function idOf(user: string, flag: '-u' | '-g'): number | undefined {
  if (/^\d+$/.test(user) && flag === '-u') return Number(user);
  const r = spawnSync('id', [flag, user], { encoding: 'utf8' });
  if (r.status !== 0) return undefined;
  const n = Number(r.stdout.trim());
  return Number.isInteger(n) ? n : undefined;
}

/** Largest Unix socket path Node handles: longer ones are silently truncated by Node 20. */
const MAX_SOCKET_PATH_BYTES = 107;

/** Throws a clear error when a Unix socket path is too long to bind or connect. */
export function checkSocketPath(p: string, what = 'sandbox socket'): void {
  const n = Buffer.byteLength(p);
  if (n > MAX_SOCKET_PATH_BYTES) {
    throw new RaasError(
      'sandbox_unavailable',
      `${what} path is ${n} bytes, over the ${MAX_SOCKET_PATH_BYTES}-byte limit of Unix socket paths (${p}): set sandbox.root to a shorter directory`,
      { retryable: false },
    );
  }
}

/**
 * As root, the sandbox user must be able to run the node that runs the tool server (CI images often
 * install node under /root, e.g. with nvm). Checks the "other" permission bits along the real path.
 */
export function checkReadableByOthers(bin: string, what: string, fix: string): void {
  let real: string;
  try {
    real = fs.realpathSync(bin);
  } catch {
    throw new RaasError('sandbox_unavailable', `${what} ${bin} does not exist: ${fix}`, { retryable: false });
  }
  const blocked: string[] = [];
  for (let dir = path.dirname(real); ; dir = path.dirname(dir)) {
    if ((fs.statSync(dir).mode & 0o001) === 0) blocked.push(dir);
    if (dir === '/') break;
  }
  if ((fs.statSync(real).mode & 0o005) !== 0o005) blocked.push(real);
  if (blocked.length) {
    throw new RaasError(
      'sandbox_unavailable',
      `${what} ${real} is not readable by the sandbox user (no access for others at ${blocked.join(', ')}): ${fix}`,
      { retryable: false },
    );
  }
}
