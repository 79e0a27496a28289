import { systemClock, type Clock } from '../../util/clock.js';
import { FairQueue, soleHolder, type Charge, type Entry, type ShareHolder, type Ticket } from './fair-queue.js';
import type { Stage } from './job.js';

/** Gives a stage's slot back; calling it twice is harmless. */
export type Release = () => void;

/** Who asks for a slot and in which priority class (default: the server's sole holder, class 0). */
export interface AcquireOptions {
  holder?: ShareHolder;
  /** Higher classes are served first; within a class, holders share by weight. */
  priority?: number;
  /** What kind of work the slot runs (the handler's name): service times are learned per kind. */
  kind?: string;
}

/** What a limiter reports: a grant after `waitedMs` in the queue, a slot held `heldMs`. */
export interface LimiterObserver {
  waited?(stage: Stage, holder: ShareHolder, waitedMs: number): void;
  /** `concurrency`: slots busy when this one was granted (it included). */
  held?(stage: Stage, holder: ShareHolder, heldMs: number, work: { kind: string | undefined; concurrency: number }): void;
}

interface Waiter extends Entry {
  kind: string | undefined;
  grant: (release: Release) => void;
  reject: (reason: unknown) => void;
  signal: AbortSignal;
  onAbort: () => void;
  ticket?: Ticket;
}

/** Weight of the newest service time in a holder's running mean. */
const EWMA = 0.2;

/**
 * One stage's concurrency limit: at most `size` holders at once; the rest wait in a weighted fair
 * queue over tenants (fair-queue.ts), FIFO for a server without tenants. A waiter whose signal
 * aborts leaves the queue at once and its `acquire` rejects with the signal's reason, so
 * cancelling a queued job is aborting its signal (p-queue's `signal` option, without the
 * dependency). `resize` changes the limit at any time; a smaller limit never takes a slot back, it
 * only grants none until enough are released.
 */
export class StageLimiter {
  private readonly queue = new FairQueue<Waiter>();
  /** Each holder's recent service time in this stage (ms), the cost the fair queue charges. */
  private readonly cost = new Map<ShareHolder, number>();
  private meanCost = 0;
  private sizeValue: number;
  busy = 0;
  /** Called when a slot of a holder at its cross-stage cap was released (the other stages may now grant). */
  onCapFreed: (() => void) | undefined;

  constructor(
    readonly stage: Stage,
    size: number,
    private readonly clock: Clock = systemClock,
    private readonly observer: LimiterObserver = {},
    private readonly fallback: ShareHolder = soleHolder(),
  ) {
    this.sizeValue = size;
  }

  /** Slots of the stage. */
  get size(): number {
    return this.sizeValue;
  }

  /** Slots of the waiter lanes, holes and passed ones included (bounded: cut back as heads move). */
  get backlog(): number {
    return this.queue.backlog;
  }

  /** Holders waiting for a slot. */
  get depth(): number {
    return this.queue.size;
  }

  /** Waiters of one holder. */
  depthOf(holder: ShareHolder): number {
    return this.queue.sizeOf(holder);
  }

  /** Changes the number of slots; waiters are granted at once when it grows. */
  resize(size: number): void {
    this.sizeValue = Math.max(0, Math.floor(size));
    this.pump();
  }

  /** Resolves with the release once a slot is free; rejects with `signal.reason` if it aborts first. */
  acquire(signal: AbortSignal, opts: AcquireOptions = {}): Promise<Release> {
    if (signal.aborted) return Promise.reject(signal.reason);
    const holder = opts.holder ?? this.fallback;
    const now = this.clock.now();
    if (this.busy < this.sizeValue && this.queue.size === 0 && holder.inStage < holder.maxInStage) {
      this.observer.waited?.(this.stage, holder, 0);
      const charge = this.queue.charge(holder, opts.priority ?? 0, this.costOf(holder));
      return Promise.resolve(this.take(holder, charge, opts.kind));
    }
    return new Promise((grant, reject) => {
      const w: Waiter = {
        holder,
        enqueuedAt: now,
        kind: opts.kind,
        grant,
        reject,
        signal,
        onAbort: () => {
          if (w.ticket) this.queue.remove(w, w.ticket);
          reject(signal.reason);
        },
      };
      signal.addEventListener('abort', w.onAbort, { once: true });
      w.ticket = this.queue.push(w, opts.priority ?? 0);
      // A free slot with only capped holders waiting goes to this one at once.
      if (this.busy < this.sizeValue) this.pump();
    });
  }

  /** Grants waiting holders while slots are free (the limiters of a pipeline call each other's after a capped release). */
  pump(): void {
    while (this.busy < this.sizeValue && this.queue.size > 0) {
      const next = this.queue.take(
        (h) => h.inStage < h.maxInStage,
        (h) => this.costOf(h),
      );
      if (!next) return;
      const w = next.entry;
      w.signal.removeEventListener('abort', w.onAbort);
      this.observer.waited?.(this.stage, w.holder, this.clock.now() - w.enqueuedAt);
      w.grant(this.take(w.holder, next.charge, w.kind));
    }
  }

  private take(holder: ShareHolder, charge: Charge, kind: string | undefined): Release {
    this.busy++;
    holder.inStage++;
    const concurrency = this.busy;
    const t0 = this.clock.now();
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      this.busy--;
      const capped = holder.inStage >= holder.maxInStage;
      holder.inStage--;
      // A slot costs at least 1 ms, so jobs that end at once still take turns between tenants.
      const ms = Math.max(1, this.clock.now() - t0);
      this.learn(holder, ms);
      this.queue.settle(charge, ms);
      this.observer.held?.(this.stage, holder, ms, { kind, concurrency });
      this.pump();
      if (capped) this.onCapFreed?.();
    };
  }

  /** A holder's expected service time: its own running mean, else the stage's, else 1 ms. */
  private costOf(h: ShareHolder): number {
    return this.cost.get(h) ?? (this.meanCost || 1);
  }

  private learn(h: ShareHolder, ms: number): void {
    const v = ms;
    const old = this.cost.get(h);
    this.cost.set(h, old === undefined ? v : old + EWMA * (v - old));
    this.meanCost = this.meanCost === 0 ? v : this.meanCost + EWMA * (v - this.meanCost);
  }
}
