/** A running mean of service times at one level of concurrency. */
interface Bucket {
  mean: number;
  n: number;
  /** The decision interval of its last sample. */
  seen: number;
}

/** Samples a bucket needs before its mean is trusted. */
const MIN_SAMPLES = 5;
/** Past this many samples a bucket's mean becomes an exponential one (it follows a drifting workload). */
const WINDOW = 50;
/** A low-concurrency baseline older than this many intervals is not compared against. */
const STALE = 300;

/**
 * Service times of one stage, per kind of work (handler) and per level of concurrency (powers of
 * two of the slots busy when the job was granted). Comparing the mean at the concurrency a stage
 * runs at now with the mean at the lowest concurrency seen tells whether more slots make each job
 * slower (a CPU, disk or backend saturating) without mistaking a slower kind of task for
 * contention: each kind is compared only with itself.
 */
export class ServiceTimes {
  private readonly kinds = new Map<string, Map<number, Bucket>>();
  /** Samples per kind in the current interval. */
  private readonly recent = new Map<string, number>();
  private interval = 0;

  add(kind: string, concurrency: number, ms: number): void {
    let buckets = this.kinds.get(kind);
    if (!buckets) this.kinds.set(kind, (buckets = new Map()));
    const level = Math.floor(Math.log2(Math.max(1, concurrency)));
    const b = buckets.get(level);
    if (!b) buckets.set(level, { mean: ms, n: 1, seen: this.interval });
    else {
      b.n++;
      b.mean += (ms - b.mean) / Math.min(b.n, WINDOW);
      b.seen = this.interval;
    }
    this.recent.set(kind, (this.recent.get(kind) ?? 0) + 1);
  }

  /**
   * tolerance × base / now, clamped to [0.5, 1], averaged over the kinds seen this interval by
   * their number of samples: 1 when no kind shows more slowdown than the tolerance (or none can be
   * told yet).
   */
  gradient(tolerance: number, concurrency: number): number {
    let weighted = 0;
    let total = 0;
    const top = Math.floor(Math.log2(Math.max(1, concurrency)));
    for (const [kind, count] of this.recent) {
      const buckets = this.kinds.get(kind)!;
      const base = this.lowest(buckets);
      const now = this.at(buckets, top);
      const g = !base || !now || now === base ? 1 : Math.min(1, Math.max(0.5, (tolerance * base.mean) / now.mean));
      weighted += g * count;
      total += count;
    }
    return total === 0 ? 1 : weighted / total;
  }

  /** Ends a decision interval. */
  roll(): void {
    this.recent.clear();
    this.interval++;
  }

  /** The trusted bucket of the lowest concurrency, when recent enough to compare with. */
  private lowest(buckets: Map<number, Bucket>): Bucket | undefined {
    let best: [number, Bucket] | undefined;
    for (const [level, b] of buckets)
      if (b.n >= MIN_SAMPLES && this.interval - b.seen <= STALE && (!best || level < best[0])) best = [level, b];
    return best?.[1];
  }

  /** The trusted bucket at `level`, else the nearest trusted one below it. */
  private at(buckets: Map<number, Bucket>, level: number): Bucket | undefined {
    for (let l = level; l >= 0; l--) {
      const b = buckets.get(l);
      if (b && b.n >= MIN_SAMPLES) return b;
    }
    return undefined;
  }
}
