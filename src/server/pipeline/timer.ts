import type { Clock } from '../../util/clock.js';

/**
 * Counts only the time a job spends inside a stage: `resume()` when a stage starts, `pause()` when
 * it ends. Queue waiting is never counted. Calls `onExpire` once when counted time reaches the limit.
 */
export class PausableTimer {
  private counted = 0;
  private startedAt: number | undefined;
  private handle: unknown;
  private fired = false;
  private disposed = false;

  constructor(
    private readonly limitMs: number,
    private readonly clock: Clock,
    private readonly onExpire: () => void,
  ) {}

  /** True while counting. */
  get running(): boolean {
    return this.startedAt !== undefined;
  }

  /** True once the limit was reached. */
  get expired(): boolean {
    return this.fired;
  }

  /** Counted milliseconds so far (including the current stretch). */
  elapsedMs(): number {
    return this.counted + (this.startedAt === undefined ? 0 : this.clock.now() - this.startedAt);
  }

  resume(): void {
    if (this.startedAt !== undefined || this.fired || this.disposed) return;
    this.startedAt = this.clock.now();
    const left = Math.max(0, this.limitMs - this.counted);
    this.handle = this.clock.setTimeout(() => this.expire(), left);
  }

  pause(): void {
    if (this.startedAt === undefined) return;
    this.counted += this.clock.now() - this.startedAt;
    this.startedAt = undefined;
    this.clock.clearTimeout(this.handle);
    this.handle = undefined;
  }

  /** Stops counting for good (the job ended). */
  dispose(): void {
    this.pause();
    this.disposed = true;
  }

  private expire(): void {
    if (this.fired || this.disposed) return;
    this.pause();
    this.fired = true;
    this.onExpire();
  }
}
