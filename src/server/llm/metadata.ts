import { systemClock, type Clock } from '../../util/clock.js';

/** How the metadata of one backend (model id, max_model_len) is fetched and how often a failure is retried. */
export interface MetadataOptions {
  /** Deadline of one fetch (its own: no caller's signal ends it). */
  timeoutMs?: number;
  /** Wait after the first failure before the next caller fetches again; doubles per failure. */
  retryMs?: number;
  retryMaxMs?: number;
  /** The backoff's time (tests drive it; default: the system clock). */
  clock?: Pick<Clock, 'now'>;
}

/**
 * A backend's metadata (`/v1/models`, `/get_server_info`), fetched once on demand and shared by every
 * job. A failed fetch is never the final word: callers get "unknown" (undefined) for a backoff
 * window, then the next caller fetches again. The fetch runs under its own deadline, so a job that is
 * cancelled while waiting stops waiting without ending the fetch for the others.
 */
export class BackendMetadata<T> {
  private value: T | undefined;
  private known = false;
  private inflight: Promise<T | undefined> | undefined;
  private failures = 0;
  private retryAt = Number.NEGATIVE_INFINITY;
  private readonly timeoutMs: number;
  private readonly retryMs: number;
  private readonly retryMaxMs: number;
  private readonly clock: Pick<Clock, 'now'>;

  constructor(
    private readonly fetcher: (signal: AbortSignal) => Promise<T>,
    opts: MetadataOptions = {},
  ) {
    this.timeoutMs = opts.timeoutMs ?? 10_000;
    this.retryMs = opts.retryMs ?? 1_000;
    this.retryMaxMs = opts.retryMaxMs ?? 60_000;
    this.clock = opts.clock ?? systemClock;
  }

  /** True once a fetch succeeded. */
  get isKnown(): boolean {
    return this.known;
  }

  /** The metadata, or undefined while unknown (a failure within its backoff window). `signal` only ends this caller's wait. */
  get(signal?: AbortSignal): Promise<T | undefined> {
    if (this.known) return Promise.resolve(this.value);
    const p = this.inflight ?? (this.clock.now() >= this.retryAt ? this.load() : undefined);
    if (!p) return Promise.resolve(undefined);
    return signal ? untilAborted(p, signal) : p;
  }

  /** Starts a fetch now when the metadata is unknown and none runs (a probe saw the backend answer again). */
  refresh(): void {
    if (!this.known && !this.inflight) void this.load();
  }

  private load(): Promise<T | undefined> {
    const p = this.fetcher(AbortSignal.timeout(this.timeoutMs)).then(
      (v) => {
        this.value = v;
        this.known = true;
        this.failures = 0;
        return v;
      },
      () => {
        this.retryAt = this.clock.now() + Math.min(this.retryMaxMs, this.retryMs * 2 ** this.failures++);
        return undefined;
      },
    );
    this.inflight = p;
    void p.finally(() => {
      if (this.inflight === p) this.inflight = undefined;
    });
    return p;
  }
}

/** `p`, or a rejection with the signal's reason once it aborts (the listener is removed either way). */
function untilAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
