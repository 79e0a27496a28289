import type { Metric, Registry } from 'prom-client';

/** One exposed sample, as prom-client's Registry formats it. */
interface Sample {
  labels: Record<string, string | number>;
  value: number;
  metricName: string;
}

/** One label set's counts: per bucket (not cumulative), the sum and the count of observations. */
interface Series {
  labels: Record<string, string>;
  counts: Float64Array;
  sum: number;
  count: number;
}

/**
 * A Prometheus histogram for the per-job hot path, exposed through a prom-client Registry exactly
 * as prom-client's own Histogram writes it (`_bucket{le=…}` cumulative, `+Inf`, `_sum`, `_count`).
 * An observation is a loop over the bounds and three additions on a series the caller holds;
 * prom-client's `observe` builds a label hash, validates the labels and allocates per call (nine
 * observations per job cost more than the rest of the metrics together). Everything else (the text
 * format, the registry, default metrics) stays prom-client's: this only counts.
 */
export class CountingHistogram<L extends string> {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly series = new Map<string, Series>();
  private readonly bounds: Float64Array;

  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly L[],
    buckets: readonly number[],
    registers: readonly Registry[],
  ) {
    this.bounds = Float64Array.from([...buckets].sort((a, b) => a - b));
    for (const r of registers) r.registerMetric(this as unknown as Metric);
  }

  /** The recorder of one label set (made once; hold it). */
  child(labels: Record<L, string>): (value: number) => void {
    const key = this.labelNames.map((l) => labels[l]).join('\0');
    let s = this.series.get(key);
    if (!s) {
      s = { labels: { ...labels }, counts: new Float64Array(this.bounds.length), sum: 0, count: 0 };
      this.series.set(key, s);
    }
    const series = s;
    const bounds = this.bounds;
    return (value: number) => {
      // As prom-client: a value that is not finite is refused (it would poison _sum).
      if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
      series.sum += value;
      series.count++;
      for (let i = 0; i < bounds.length; i++)
        if (value <= bounds[i]!) {
          series.counts[i]!++;
          return;
        }
    };
  }

  /** prom-client's Registry reads a metric through this (text and JSON exposition alike). */
  async get(): Promise<{ name: string; help: string; type: 'histogram'; values: Sample[]; aggregator: 'sum' }> {
    const values: Sample[] = [];
    const bucket = `${this.name}_bucket`;
    for (const s of this.series.values()) {
      let acc = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        acc += s.counts[i]!;
        values.push({ labels: { le: this.bounds[i]!, ...s.labels }, value: acc, metricName: bucket });
      }
      values.push({ labels: { le: '+Inf', ...s.labels }, value: s.count, metricName: bucket });
      values.push({ labels: { ...s.labels }, value: s.sum, metricName: `${this.name}_sum` });
      values.push({ labels: { ...s.labels }, value: s.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: 'histogram', values, aggregator: 'sum' };
  }

  /** Zeroes every series (prom-client's `registry.resetMetrics()`). */
  reset(): void {
    for (const s of this.series.values()) {
      s.counts.fill(0);
      s.sum = 0;
      s.count = 0;
    }
  }
}
