import type { Readable } from 'node:stream';
import { SIDECAR_LIMITS } from '../protocol/sidecar.js';
import type { Clock } from '../util/clock.js';
import { LineSplitter } from './lines.js';
import { SidecarSession } from './session.js';
import type { SidecarBackend, SidecarLog } from './types.js';

/** Options of runSidecar. */
export interface RunSidecarOptions {
  backend: SidecarBackend;
  input: Readable;
  /** Writes one protocol line (no newline in `line`); a rejection means the reader is gone. */
  writeLine(line: string): Promise<void>;
  log: SidecarLog;
  clock?: Clock;
  maxLineBytes?: number;
  progressIntervalMs?: number;
  /** Aborting it ends the session like EOF (SIGTERM, SIGINT). */
  signal?: AbortSignal;
  /** Called once when closing starts (shutdown, EOF, signal). */
  onClosing?: () => void;
}

/**
 * Serves the line protocol until `shutdown`, EOF on `input`, or `signal`; then every in-flight
 * op is cancelled and answered, the coordinator closed, and the promise resolves.
 */
export async function runSidecar(opts: RunSidecarOptions): Promise<void> {
  const maxLineBytes = opts.maxLineBytes ?? SIDECAR_LIMITS.max_line_bytes;
  let writes: Promise<void> = Promise.resolve();
  let broken = false;
  const session: SidecarSession = new SidecarSession({
    backend: opts.backend,
    log: opts.log,
    clock: opts.clock,
    progressIntervalMs: opts.progressIntervalMs,
    maxLineBytes,
    onClosing: opts.onClosing,
    send: (message) => {
      if (broken) return;
      const line = JSON.stringify(message);
      // Chained so lines leave in the order they were produced.
      writes = writes
        .then(() => opts.writeLine(line))
        .catch((err: unknown) => {
          if (broken) return;
          broken = true;
          opts.log.error(`stdout closed (${err instanceof Error ? err.message : String(err)}); shutting down`);
          void session.end('stdout closed');
        });
    },
  });
  opts.log.setWarningSink?.((msg, data) => session.emitWarning(msg, data));
  const splitter = new LineSplitter(maxLineBytes);
  const onData = (chunk: Buffer | string): void => {
    for (const item of splitter.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk)) {
      if (item.kind === 'line') session.handleLine(item.text);
      else session.handleTooLong(item.bytes);
    }
  };
  const onEnd = (): void => {
    for (const item of splitter.end()) {
      if (item.kind === 'line') session.handleLine(item.text);
      else session.handleTooLong(item.bytes);
    }
    void session.end('stdin closed');
  };
  const onAbort = (): void => void session.end('signal received');
  opts.input.on('data', onData);
  opts.input.once('end', onEnd);
  opts.input.once('error', onEnd);
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  if (opts.signal?.aborted) onAbort();
  try {
    await session.ended;
    await writes;
  } finally {
    opts.input.off('data', onData);
    opts.input.off('end', onEnd);
    opts.input.off('error', onEnd);
    opts.signal?.removeEventListener('abort', onAbort);
    opts.log.setWarningSink?.(undefined);
  }
}
