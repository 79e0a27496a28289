import type { Stage } from './job.js';

/** Gives a stage's slot back; calling it twice is harmless. */
export type Release = () => void;

interface Waiter {
  grant: (release: Release) => void;
  reject: (reason: unknown) => void;
  signal: AbortSignal;
  onAbort: () => void;
}

/**
 * One stage's concurrency limit: at most `size` holders at once, the rest wait in FIFO order. A
 * waiter whose signal aborts leaves the queue at once and its `acquire` rejects with the signal's
 * reason, so cancelling a queued job is aborting its signal (p-queue's `signal` option, without
 * the dependency: this is all of it).
 */
export class StageLimiter {
  private readonly queue: Array<Waiter | undefined> = [];
  private head = 0;
  /** Slots of the waiter array, holes and passed ones included (bounded: it is cut back as the head moves). */
  get backlog(): number {
    return this.queue.length;
  }

  /** Waiters still queued (an aborted one leaves a hole until the head passes it). */
  private waiting = 0;
  busy = 0;

  constructor(
    readonly stage: Stage,
    readonly size: number,
  ) {}

  /** Holders waiting for a slot. */
  get depth(): number {
    return this.waiting;
  }

  /** Resolves with the release once a slot is free; rejects with `signal.reason` if it aborts first. */
  acquire(signal: AbortSignal): Promise<Release> {
    if (signal.aborted) return Promise.reject(signal.reason);
    if (this.busy < this.size && this.waiting === 0) return Promise.resolve(this.take());
    return new Promise((grant, reject) => {
      const w: Waiter = {
        grant,
        reject,
        signal,
        onAbort: () => {
          const i = this.queue.indexOf(w, this.head);
          if (i >= 0) {
            this.queue[i] = undefined;
            this.waiting--;
          }
          reject(signal.reason);
        },
      };
      signal.addEventListener('abort', w.onAbort, { once: true });
      this.queue.push(w);
      this.waiting++;
    });
  }

  private take(): Release {
    this.busy++;
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      this.busy--;
      this.pump();
    };
  }

  private pump(): void {
    while (this.busy < this.size && this.head < this.queue.length) {
      const w = this.queue[this.head++];
      // Compact now and then so the array does not grow without bound.
      if (this.head > 1024 && this.head * 2 > this.queue.length) {
        this.queue.splice(0, this.head);
        this.head = 0;
      }
      if (!w) continue;
      this.waiting--;
      w.signal.removeEventListener('abort', w.onAbort);
      w.grant(this.take());
    }
  }
}
