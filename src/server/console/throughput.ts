import type { JobEvent } from '../../protocol/events.js';
import type { ThroughputBucket } from '../../ui/model.js';

type Counted = 'done' | 'failed' | 'cancelled' | 'timed_out';

/**
 * Jobs admitted and ended per time bucket over the last minutes (the console's throughput and
 * failures chart), and totals since the server started. Buckets are keyed by wall-clock time, so
 * a quiet minute shows as zeros rather than disappearing.
 */
export class Throughput {
  private readonly buckets = new Map<number, ThroughputBucket & { reward_sum: number }>();
  readonly totals = { admitted: 0, done: 0, failed: 0, cancelled: 0, timed_out: 0 };

  constructor(
    /** Bucket width in seconds. */
    readonly bucketS = 10,
    /** Buckets kept (the chart's span is bucketS × count). */
    readonly count = 90,
  ) {}

  apply(e: JobEvent): void {
    const counted = e.state === 'done' || e.state === 'failed' || e.state === 'cancelled' || e.state === 'timed_out';
    if (e.from !== undefined && !counted) return;
    const b = this.bucket(e.at);
    if (e.from === undefined) {
      b.admitted++;
      this.totals.admitted++;
      return;
    }
    const s = e.state as Counted;
    b[s]++;
    this.totals[s]++;
    if (s === 'done' && typeof e.reward === 'number') {
      b.reward_sum += e.reward;
      b.mean_reward = b.reward_sum / b.done;
    }
  }

  /** The last `count` buckets up to `nowMs`, oldest first, zeros where nothing happened. */
  series(nowMs: number): ThroughputBucket[] {
    const last = this.start(nowMs);
    const out: ThroughputBucket[] = [];
    for (let t = last - (this.count - 1) * this.bucketS; t <= last; t += this.bucketS) {
      const b = this.buckets.get(t);
      out.push(
        b
          ? {
              t,
              admitted: b.admitted,
              done: b.done,
              failed: b.failed,
              cancelled: b.cancelled,
              timed_out: b.timed_out,
              mean_reward: b.mean_reward,
            }
          : { t, admitted: 0, done: 0, failed: 0, cancelled: 0, timed_out: 0, mean_reward: null },
      );
    }
    return out;
  }

  private start(ms: number): number {
    return Math.floor(ms / 1000 / this.bucketS) * this.bucketS;
  }

  private bucket(ms: number): ThroughputBucket & { reward_sum: number } {
    const t = this.start(ms);
    let b = this.buckets.get(t);
    if (!b) {
      b = { t, admitted: 0, done: 0, failed: 0, cancelled: 0, timed_out: 0, mean_reward: null, reward_sum: 0 };
      this.buckets.set(t, b);
      const oldest = t - this.count * this.bucketS;
      for (const k of this.buckets.keys()) if (k <= oldest) this.buckets.delete(k);
    }
    return b;
  }
}
