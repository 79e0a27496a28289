import fs from 'node:fs';
import path from 'node:path';
import { ToolInputError } from './bash-pty.js';

/** A refusal that names a limit; the host turns it into a `sandbox_limit` error. */
export class ToolLimitError extends Error {
  readonly code = 'sandbox_limit';
}

/** A path that does not exist (the host maps it to a `tool_error` with "no such file"). */
class ToolNotFoundError extends ToolInputError {}

/** Default cap of one read (the host passes `sandbox.max_read_bytes`). */
export const DEFAULT_MAX_READ = 16 << 20;

/** `p` as an absolute path inside the sandbox: relative paths are taken from the workspace. */
function resolveIn(workspace: string, p: unknown, name = 'path'): string {
  if (typeof p !== 'string' || p === '' || p.includes('\0')) throw new ToolInputError(`${name} must be a non-empty string`);
  return path.resolve(workspace, p);
}

/**
 * Reads one regular file as the sandbox user, from inside the sandbox: symlinks resolve in the
 * sandbox's own view, so a link to /etc/shadow or /root/… reaches only what the sandbox itself can
 * see. Opened non-blocking so a FIFO cannot hang the reader; anything but a regular file is refused;
 * at most `maxBytes` are read (a file growing while it is read is cut there and refused).
 */
export function readFileCapped(workspace: string, p: unknown, maxBytes: number): { data: string; bytes: number } {
  const file = resolveIn(workspace, p);
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK | fs.constants.O_NOCTTY);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') throw new ToolNotFoundError(`no such file: ${file}`);
    throw new ToolInputError(`cannot open ${file}: ${code ?? (e as Error).message}`);
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) throw new ToolInputError(`${file} is not a regular file (${kind(st)}); only regular files can be read`);
    if (st.size > maxBytes)
      throw new ToolLimitError(`${file} is ${st.size} bytes, over the read limit of ${maxBytes} bytes (sandbox.max_read_bytes)`);
    const buf = Buffer.allocUnsafe(Math.min(maxBytes + 1, Math.max(st.size + 1, 64 * 1024)));
    let n = 0;
    for (;;) {
      if (n === buf.length) {
        if (n > maxBytes)
          throw new ToolLimitError(`${file} grew past the read limit of ${maxBytes} bytes while it was read (sandbox.max_read_bytes)`);
        break;
      }
      const r = fs.readSync(fd, buf, n, buf.length - n, null);
      if (r === 0) break;
      n += r;
    }
    if (n > maxBytes)
      throw new ToolLimitError(`${file} grew past the read limit of ${maxBytes} bytes while it was read (sandbox.max_read_bytes)`);
    return { data: buf.subarray(0, n).toString('base64'), bytes: n };
  } finally {
    fs.closeSync(fd);
  }
}

function kind(st: fs.Stats): string {
  if (st.isDirectory()) return 'a directory';
  if (st.isFIFO()) return 'a FIFO';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'a device';
  if (st.isSocket()) return 'a socket';
  return 'not a file';
}

/**
 * Writes files into the workspace as the sandbox user (a job's files, or a pooled sandbox's files
 * when a job takes it); `append` adds a further part of large files. Keys are relative paths that
 * stay inside the workspace.
 */
export function writeFiles(workspace: string, files: unknown, append = false): { written: number } {
  if (!files || typeof files !== 'object' || Array.isArray(files))
    throw new ToolInputError('files must be an object of relative path → content');
  let written = 0;
  for (const [rel, content] of Object.entries(files as Record<string, unknown>)) {
    if (typeof content !== 'string') throw new ToolInputError(`files["${rel}"] must be a string`);
    if (path.isAbsolute(rel) || rel.split(/[\\/]+/).includes('..') || rel === '')
      throw new ToolInputError(`files key "${rel}" must be a relative path inside the workspace`);
    const target = path.join(workspace, rel);
    fs.mkdirSync(path.dirname(target), { recursive: true });
    if (append) fs.appendFileSync(target, content);
    else fs.writeFileSync(target, content);
    written++;
  }
  return { written };
}

/** Copies a read-only seed tree (an image) into the workspace at start, keeping symlinks as they are. */
export function copySeed(seed: string, workspace: string): void {
  fs.cpSync(seed, workspace, { recursive: true, verbatimSymlinks: true, preserveTimestamps: true, force: true });
}

/** Free bytes of the filesystem holding the workspace (the tmpfs capped by sandbox.disk_mb). */
export function freeBytes(dir: string): number | undefined {
  try {
    const s = fs.statfsSync(dir);
    return s.bavail * s.bsize;
  } catch {
    return undefined;
  }
}
