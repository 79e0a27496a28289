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

  /**
   * Starts counting. The armed timeout is left in place across pauses (a pause only moves the
   * deadline later, so a timeout armed earlier fires at or before it and re-arms for what is left):
   * one setTimeout per job instead of a setTimeout and a clearTimeout per stage.
   */
  resume(): void {
    if (this.startedAt !== undefined || this.fired || this.disposed) return;
    this.startedAt = this.clock.now();
    if (this.handle === undefined) this.arm();
  }

  pause(): void {
    if (this.startedAt === undefined) return;
    this.counted += this.clock.now() - this.startedAt;
    this.startedAt = undefined;
  }

  /** Stops counting for good (the job ended). */
  dispose(): void {
    this.pause();
    this.disposed = true;
    if (this.handle !== undefined) this.clock.clearTimeout(this.handle);
    this.handle = undefined;
  }

  private arm(): void {
    this.handle = this.clock.setTimeout(this.check, Math.max(0, this.limitMs - this.counted));
  }

  /** The armed timeout: expires when the counted time reached the limit, else re-arms while counting. */
  private readonly check = (): void => {
    this.handle = undefined;
    if (this.fired || this.disposed) return;
    // Within a millisecond counts as reached: timers have millisecond resolution.
    const left = this.limitMs - this.elapsedMs();
    if (left >= 1) {
      // Paused: the next resume() arms again.
      if (this.startedAt !== undefined) this.handle = this.clock.setTimeout(this.check, left);
      return;
    }
    this.pause();
    this.fired = true;
    this.onExpire();
  };
}
