import { RaasError } from '../protocol/errors.js';
import { SIDECAR_LIMITS } from '../protocol/sidecar.js';
import { StderrLog, type LogLevel } from './log.js';
import { runSidecar } from './run.js';
import { guardStdout } from './stdout-guard.js';
import type { SidecarBackend, SidecarLog } from './types.js';

/** Options of serveStdio. */
export interface ServeStdioOptions {
  maxLineBytes?: number;
  progressIntervalMs?: number;
  logLevel?: LogLevel;
  /** Longest wait for a clean close before the process exits anyway (default 30 s). */
  closeTimeoutMs?: number;
}

/**
 * Runs the sidecar on this process's stdin/stdout and exits: 0 after `shutdown` or EOF with a
 * clean close, 1 when the close failed or ran past closeTimeoutMs. `makeBackend` runs after the
 * stdout guard is installed, so nothing it loads can write to stdout; a RaasError it throws is
 * written as a `fatal` event before exiting 1.
 */
export async function serveStdio(makeBackend: (log: SidecarLog) => Promise<SidecarBackend>, opts: ServeStdioOptions = {}): Promise<never> {
  const log = new StderrLog(opts.logLevel ?? 'info');
  const guard = guardStdout((bytes) =>
    log.warn(`something wrote ${bytes} bytes to stdout; redirected to stderr (stdout carries protocol lines only)`),
  );
  let backend: SidecarBackend;
  try {
    backend = await makeBackend(log);
  } catch (err) {
    const code = err instanceof RaasError ? err.code : 'internal';
    const message = err instanceof Error ? err.message : String(err);
    log.error(message);
    await guard.writeLine(JSON.stringify({ event: 'fatal', data: { code, message } })).catch(() => undefined);
    process.exit(1);
  }
  const stop = new AbortController();
  const onSignal = (): void => stop.abort();
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
  // EPIPE on stdout must not crash the process before the coordinator is closed.
  process.stdout.on('error', () => undefined);
  let exitCode = 0;
  const closeTimeoutMs = opts.closeTimeoutMs ?? 30_000;
  // Armed when closing starts: a coordinator that hangs in close() must not keep the process alive.
  const armDeadline = (): void => {
    setTimeout(() => {
      log.error(`close did not finish within ${closeTimeoutMs} ms; exiting`);
      process.exit(1);
    }, closeTimeoutMs).unref();
  };
  try {
    await runSidecar({
      backend,
      input: process.stdin,
      writeLine: (line) => guard.writeLine(line),
      log,
      maxLineBytes: opts.maxLineBytes ?? SIDECAR_LIMITS.max_line_bytes,
      progressIntervalMs: opts.progressIntervalMs,
      signal: stop.signal,
      onClosing: armDeadline,
    });
  } catch (err) {
    exitCode = 1;
    log.error(`sidecar failed: ${err instanceof Error ? err.stack : String(err)}`);
  }
  log.info('closed; exiting');
  process.exit(exitCode);
}
