import type { Clock } from '../../util/clock.js';
import type { BackendClient } from './types.js';

/** The breaker and probe settings (`llm.unhealthy_after`, `llm.probe_interval_s`, `llm.probe_timeout_s`). */
export interface HealthConfig {
  unhealthy_after: number;
  probe_interval_s: number;
  probe_timeout_s: number;
}

/** What the monitor tracks of one backend (the pool's Backend). */
export interface Watched {
  readonly address: string;
  readonly client: BackendClient;
  /** False while the breaker is open: the backend gets no new work. */
  healthy: boolean;
  /** Consecutive connection failures and timeouts (of calls and probes) since a call last succeeded. */
  failures: number;
  /** The last of those failures, for /status, the log and the error of a job left without a backend. */
  lastError: string | null;
}

/** What the pool does when a breaker changes state. */
export interface HealthHooks<B extends Watched> {
  /** The breaker opened: take the backend out of routing and end its calls in flight. */
  opened(b: B): void;
  /** A probe (or a call) answered: route to the backend again. */
  closed(b: B): void;
}

/**
 * A circuit breaker per backend and the background probe that brings a backend back.
 * `unhealthy_after` consecutive connection failures or timeouts, of calls or probes, open it; a call
 * that succeeds resets the count (a probe that succeeds does not: an engine can hang behind an API
 * that still answers). An open backend is probed every `probe_interval_s`; one answer closes it
 * half-open, so a single further failure opens it again. Probes also run on healthy backends, so a
 * backend that hangs (SIGSTOP, a stuck host) opens without waiting for a call's deadline.
 */
export class BackendHealth<B extends Watched> {
  private readonly timers = new Map<B, { handle: unknown }>();
  private closed = false;
  /**
   * Generation is paused (co-located engines asleep, or answering 503 while they are): failures of
   * probes and of dropped calls say nothing about the backend then, and are not counted.
   */
  private suspended = false;

  constructor(
    private readonly cfg: HealthConfig,
    private readonly clock: Clock,
    private readonly hooks: HealthHooks<B>,
  ) {}

  /** A call to `b` got no answer (refused, reset, or past its deadline). */
  failure(b: B, message: string): void {
    if (this.suspended) return;
    b.failures++;
    b.lastError = message;
    if (b.healthy && b.failures >= this.cfg.unhealthy_after) {
      b.healthy = false;
      this.hooks.opened(b);
    }
  }

  /** A call to `b` succeeded. */
  success(b: B): void {
    b.failures = 0;
    if (!b.healthy) this.restore(b);
  }

  /** Starts probing `b` (first probe at once). No-op for a client without `probe`. */
  watch(b: B): void {
    if (this.closed || this.timers.has(b) || !b.client.probe) return;
    const slot = { handle: undefined as unknown };
    this.timers.set(b, slot);
    this.schedule(b, slot, 0);
  }

  /** Stops probing `b` (removed from the pool). */
  unwatch(b: B): void {
    const slot = this.timers.get(b);
    if (!slot) return;
    this.timers.delete(b);
    this.clock.clearTimeout(slot.handle);
  }

  /** Generation paused: no failure counts until resume(). */
  suspend(): void {
    this.suspended = true;
  }

  /**
   * Generation resumed: counting starts afresh; every backend is routed to again, and a backend that
   * is really gone opens again after `unhealthy_after` failures of the calls or probes that follow.
   */
  resume(): void {
    this.suspended = false;
    for (const b of this.timers.keys()) {
      b.failures = 0;
      if (!b.healthy) this.restore(b);
    }
  }

  /** Stops every probe. Safe twice. */
  close(): void {
    this.closed = true;
    for (const b of [...this.timers.keys()]) this.unwatch(b);
  }

  private restore(b: B): void {
    b.healthy = true;
    this.hooks.closed(b);
  }

  private schedule(b: B, slot: { handle: unknown }, ms: number): void {
    slot.handle = this.clock.setTimeout(() => void this.probe(b, slot), ms);
    // Probes never keep a process alive on their own.
    (slot.handle as { unref?: () => void } | undefined)?.unref?.();
  }

  private async probe(b: B, slot: { handle: unknown }): Promise<void> {
    if (this.timers.get(b) !== slot) return;
    let error: string | undefined;
    try {
      await b.client.probe!(this.cfg.probe_timeout_s * 1000);
    } catch (err) {
      error = err instanceof Error ? err.message : String(err);
    }
    // Removed (or removed and re-added) while the probe ran: that probe's answer no longer counts.
    if (this.timers.get(b) !== slot) return;
    if (error !== undefined) this.failure(b, error);
    else if (!b.healthy) {
      // Half-open: one more failure opens the breaker again.
      b.failures = this.cfg.unhealthy_after - 1;
      this.restore(b);
    }
    this.schedule(b, slot, this.cfg.probe_interval_s * 1000);
  }
}
