import { RaasError } from '../protocol/errors.js';
import { sleep, systemClock, type Clock } from '../util/clock.js';

/** Capped exponential backoff: the n-th retry waits about `min(max_ms, base_ms · 2^n)`. */
export interface Backoff {
  base_ms: number;
  max_ms: number;
}

/** 200 ms, 400 ms, 800 ms … capped at 10 s. */
export const DEFAULT_BACKOFF: Backoff = { base_ms: 200, max_ms: 10_000 };

/** A server may ask for a long pause, but never longer than this (a misconfigured proxy must not park us for hours). */
const MAX_RETRY_AFTER_MS = 5 * 60_000;

/**
 * Delay before retry number `attempt` (0-based), with "equal jitter": half of the capped exponential
 * is fixed, half random, so synchronized clients (a whole fleet after a server restart) spread out
 * while each still waits at least half the nominal delay.
 */
export function backoffDelay(attempt: number, backoff: Backoff, random: () => number = Math.random): number {
  const cap = Math.min(backoff.max_ms, backoff.base_ms * 2 ** attempt);
  return cap / 2 + (random() * cap) / 2;
}

/**
 * Parses a `Retry-After` header (delta-seconds or an HTTP-date) into milliseconds from now;
 * undefined when absent or unparsable.
 */
export function parseRetryAfter(value: string | string[] | undefined, nowMs: number = Date.now()): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (v === undefined || v.trim() === '') return undefined;
  if (/^\s*\d+(\.\d+)?\s*$/.test(v)) return Math.min(MAX_RETRY_AFTER_MS, Math.round(Number(v) * 1000));
  const date = Date.parse(v);
  if (Number.isNaN(date)) return undefined;
  return Math.min(MAX_RETRY_AFTER_MS, Math.max(0, date - nowMs));
}

/** What one attempt of a retried call tells the retry layer. */
export interface AttemptFailure {
  error: unknown;
  /** True for connection errors and 5xx answers: the only failures worth retrying. */
  retryable: boolean;
  /** The server's `Retry-After`, in ms, when it sent one. */
  retryAfterMs?: number;
}

/** Raised by an attempt so the retry layer knows whether and when to try again. */
export class AttemptError extends Error {
  constructor(readonly failure: AttemptFailure) {
    super(failure.error instanceof Error ? failure.error.message : String(failure.error));
    this.name = 'AttemptError';
  }
}

/** Options of {@link withRetries}. */
export interface RetryOptions {
  retries: number;
  backoff: Backoff;
  clock?: Clock;
  signal?: AbortSignal;
  random?: () => number;
  /** Called before each wait; the client uses it for debug logs and tests for assertions. */
  onRetry?: (info: { attempt: number; delayMs: number; error: unknown }) => void;
}

/**
 * Runs `attempt` until it succeeds, fails with a non-retryable error, or `retries` retries are
 * spent. Retry is a layer: the attempt itself never loops. A `Retry-After` from the server replaces
 * the backoff delay for that retry (honoured as asked, up to {@link MAX_RETRY_AFTER_MS}).
 */
export async function withRetries<T>(attempt: (n: number) => Promise<T>, opts: RetryOptions): Promise<T> {
  const clock = opts.clock ?? systemClock;
  for (let n = 0; ; n++) {
    opts.signal?.throwIfAborted();
    try {
      return await attempt(n);
    } catch (err) {
      if (!(err instanceof AttemptError)) throw err;
      const { error, retryable, retryAfterMs } = err.failure;
      if (!retryable || n >= opts.retries || opts.signal?.aborted) throw error;
      const delayMs = retryAfterMs ?? backoffDelay(n, opts.backoff, opts.random);
      opts.onRetry?.({ attempt: n + 1, delayMs, error });
      await sleep(delayMs, opts.signal, clock);
    }
  }
}

/** Node error codes that mean "the connection failed", never "the server refused the request". */
const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'ECONNABORTED',
  'UND_ERR_SOCKET',
  'EADDRNOTAVAIL',
]);

/** True when `err` (a got RequestError or a Node socket error) is a connection failure. */
export function isConnectionError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && CONNECTION_CODES.has(code)) return true;
  if (err.name === 'TimeoutError' && !(err instanceof RaasError)) return true; // got's request timeout
  const cause = (err as { cause?: unknown }).cause;
  return cause !== undefined && cause !== err && isConnectionError(cause);
}
