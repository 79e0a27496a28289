import { constants, type Stats } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { RaasError } from '../../../protocol/errors.js';

/**
 * Client-named host files (`instance.tarball`). The server runs as root, so a path from a request
 * is opened only inside the configured `sandbox.data_dirs`: both sides realpath-checked, the file
 * opened without following a final symlink and without blocking (a FIFO cannot hang the reader),
 * and the open descriptor itself checked (a regular file, its real path inside, its size capped),
 * never a path check followed by a separate read.
 */

const OPEN_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;

/** Where client-named files may come from, and how large they may be. */
export interface DataFilePolicy {
  dataDirs: readonly string[];
  maxBytes: number;
}

const invalid = (msg: string, cause?: unknown): RaasError => new RaasError('invalid_instance', msg, { cause, retryable: false });

/**
 * Checks `p` (absolute, or relative to a data dir) against the policy and answers its real path,
 * which INIT then reads with readCheckedFile. Throws `invalid_instance` naming the allowed
 * directories and `sandbox.data_dirs`.
 */
export async function checkDataFile(p: string, field: string, policy: DataFilePolicy): Promise<string> {
  const dirs = await realDirs(policy.dataDirs);
  const allowed = `allowed: ${policy.dataDirs.map((d) => JSON.stringify(d)).join(', ') || '(none)'} (set sandbox.data_dirs in the server config to add a directory)`;
  const candidates = path.isAbsolute(p) ? [p] : policy.dataDirs.map((d) => path.resolve(d, p));
  let real: string | undefined;
  for (const c of candidates) {
    real = await fs.realpath(c).catch(() => undefined);
    if (real) break;
  }
  if (!real) throw invalid(`${field}: ${JSON.stringify(p)} does not exist in the server's data directories; ${allowed}`);
  if (!dirs.some((d) => inside(d, real)))
    throw invalid(`${field}: ${JSON.stringify(p)} is outside the server's data directories; ${allowed}`);
  const fh = await openChecked(real, field, policy.maxBytes);
  await fh.handle.close();
  return real;
}

/**
 * Reads a file checkDataFile answered (its real path): opened again the same careful way, and its
 * descriptor must still name that path (a directory swapped for a symlink since is refused).
 */
export async function readCheckedFile(
  real: string,
  field: string,
  maxBytes = Number.MAX_SAFE_INTEGER,
  signal?: AbortSignal,
): Promise<Buffer> {
  if (!path.isAbsolute(real)) throw invalid(`${field}: cannot read ${JSON.stringify(real)}: not the absolute path /process checked`);
  signal?.throwIfAborted();
  const { handle, size } = await openChecked(real, field, maxBytes);
  try {
    const buf = Buffer.alloc(size + 1);
    let n = 0;
    for (;;) {
      signal?.throwIfAborted();
      const { bytesRead } = await handle.read(buf, n, buf.length - n, n);
      if (bytesRead === 0) break;
      n += bytesRead;
      if (n > size) throw invalid(`${field}: cannot read ${real}: it grew while it was read`);
    }
    return buf.subarray(0, n);
  } finally {
    await handle.close();
  }
}

async function openChecked(real: string, field: string, maxBytes: number): Promise<{ handle: fs.FileHandle; size: number }> {
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(real, OPEN_FLAGS);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ELOOP' ? 'it is a symbolic link' : code === 'ENOENT' ? 'it does not exist' : (code ?? (err as Error).message);
    throw invalid(`${field}: cannot read ${real}: ${why}`, err);
  }
  try {
    const st = await handle.stat();
    if (!st.isFile()) throw invalid(`${field}: cannot read ${real}: it is ${kind(st)}, not a regular file`);
    if (st.size > maxBytes)
      throw invalid(
        `${field}: cannot read ${real}: it is ${st.size} bytes, larger than a sandbox's disk (sandbox.disk_mb = ${Math.floor(maxBytes / 1048576)} MiB)`,
      );
    // The descriptor's own path: what was opened, whatever happened to the path since realpath().
    const opened = await fs.readlink(`/proc/self/fd/${handle.fd}`).catch(() => undefined);
    if (opened !== real)
      throw invalid(`${field}: cannot read ${real}: the path changed while it was checked (opened ${opened ?? 'an unknown path'})`);
    return { handle, size: st.size };
  } catch (err) {
    await handle.close();
    throw err;
  }
}

async function realDirs(dirs: readonly string[]): Promise<string[]> {
  const out: string[] = [];
  for (const d of dirs) {
    const r = await fs.realpath(d).catch(() => undefined);
    if (r) out.push(r);
  }
  return out;
}

function inside(dir: string, file: string): boolean {
  const rel = path.relative(dir, file);
  return rel !== '' && rel !== '..' && !rel.startsWith('../') && !path.isAbsolute(rel);
}

function kind(st: Stats): string {
  if (st.isDirectory()) return 'a directory';
  if (st.isFIFO()) return 'a FIFO';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'a device';
  if (st.isSocket()) return 'a socket';
  return 'not a regular file';
}
