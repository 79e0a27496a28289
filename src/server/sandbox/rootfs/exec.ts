// Running the converters (unsquashfs, umoci, skopeo, cp) as child processes that an abort kills:
// each runs in its own process group, so killing the group also ends anything it forked.
import { spawn } from 'node:child_process';
import { RaasError } from '../../../protocol/errors.js';
import type { Logger } from '../../../util/logger.js';

/** How to install each tool we run (the fix named in "not installed" errors). */
const INSTALL: Record<string, string> = {
  unsquashfs: 'apt-get install squashfs-tools',
  umoci: 'apt-get install umoci',
  skopeo: 'apt-get install skopeo',
  cp: 'apt-get install coreutils',
};

/** What a finished tool reported. */
export interface ToolResult {
  code: number;
  stderr: string;
}

/** Options of one tool run. */
export interface ToolOptions {
  signal?: AbortSignal;
  log?: Logger;
  env?: NodeJS.ProcessEnv;
  /** Exit codes that count as success (default [0]). */
  ok?: number[];
  /** What the error message says the tool was doing, e.g. "unpacking /x/y.sif". */
  what: string;
}

/**
 * Runs `argv` and resolves when it exits with an accepted code. Rejects with RaasError
 * ('sandbox_unavailable') when the tool is missing, ('invalid_instance') when it fails (its stderr
 * in the message), or the signal's reason after killing the process group on abort.
 */
export function runTool(argv: string[], o: ToolOptions): Promise<ToolResult> {
  o.signal?.throwIfAborted();
  const [file, ...args] = argv;
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { stdio: ['ignore', 'ignore', 'pipe'], detached: true, env: o.env ?? process.env });
    let stderr = '';
    let spawnError: NodeJS.ErrnoException | undefined;
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (d: string) => (stderr = (stderr + d).slice(-8000)));
    const kill = (): void => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        /* already gone */
      }
    };
    o.signal?.addEventListener('abort', kill, { once: true });
    o.log?.debug({ argv, pid: child.pid }, 'rootfs: running converter');
    child.once('error', (e: NodeJS.ErrnoException) => (spawnError = e));
    // 'close' follows 'error' for a failed spawn too, and comes after stderr is drained.
    child.once('close', (code, sig) => {
      o.signal?.removeEventListener('abort', kill);
      if (o.signal?.aborted) return reject(o.signal.reason);
      if (spawnError?.code === 'ENOENT') {
        const fix = INSTALL[file] ?? `install ${file}`;
        return reject(new RaasError('sandbox_unavailable', `${o.what}: ${file} is not installed: ${fix}`, { retryable: false }));
      }
      if (spawnError) return reject(new RaasError('sandbox_unavailable', `${o.what}: cannot run ${file}: ${spawnError.message}`));
      const rc = code ?? 128;
      if ((o.ok ?? [0]).includes(rc)) return resolve({ code: rc, stderr });
      // A full disk is the host's problem, not the image's: retryable once space is freed.
      const host = /No space left on device|Disk quota exceeded/.test(stderr);
      reject(
        new RaasError(
          host ? 'sandbox_unavailable' : 'invalid_instance',
          `${o.what}: ${file} failed (${sig ? `signal ${sig}` : `exit ${rc}`}): ${stderr.trim().slice(-2000) || '(no output)'}`,
          { retryable: host },
        ),
      );
    });
  });
}
