import type { Clock } from '../../util/clock.js';

/** What one read of a backend's /metrics gave. */
export interface EngineStats {
  prefix_cache_hit_rate: number | null;
  prefix_cache_hit_rate_total: number | null;
  engine_running: number | null;
  engine_waiting: number | null;
  kv_cache_usage: number | null;
  metrics_at: number | null;
  metrics_error: string | null;
}

const UNKNOWN: EngineStats = {
  prefix_cache_hit_rate: null,
  prefix_cache_hit_rate_total: null,
  engine_running: null,
  engine_waiting: null,
  kv_cache_usage: null,
  metrics_at: null,
  metrics_error: null,
};

/** Sums of each metric name over its label sets (engines of a data-parallel server add up). */
export function parsePrometheus(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const v = Number(m[2]);
    if (Number.isFinite(v)) out.set(m[1]!, (out.get(m[1]!) ?? 0) + v);
  }
  return out;
}

const first = (m: Map<string, number>, names: string[]): number | undefined => {
  for (const n of names) if (m.has(n)) return m.get(n);
  return undefined;
};

/**
 * The engine-side figures of a /metrics text, by vLLM's names (prefix-cache hits and queries are
 * token counters; the rate over an interval is Δhits/Δqueries) and SGLang's (a hit-rate gauge).
 * `prev` is the last read's counters, for the interval rate.
 */
export function engineFigures(
  m: Map<string, number>,
  prev: { hits: number; queries: number } | undefined,
): Omit<EngineStats, 'metrics_at' | 'metrics_error'> & { counters?: { hits: number; queries: number } } {
  const hits = first(m, ['vllm:prefix_cache_hits_total', 'vllm:gpu_prefix_cache_hits_total']);
  const queries = first(m, ['vllm:prefix_cache_queries_total', 'vllm:gpu_prefix_cache_queries_total']);
  const gauge = first(m, ['sglang:cache_hit_rate']);
  let rate: number | null = gauge ?? null;
  let total: number | null = null;
  let counters: { hits: number; queries: number } | undefined;
  if (hits !== undefined && queries !== undefined) {
    counters = { hits, queries };
    total = queries > 0 ? hits / queries : null;
    const dq = prev ? queries - prev.queries : queries;
    // A restarted engine starts its counters again: the interval is then its whole life.
    const dh = prev && dq >= 0 ? hits - prev.hits : hits;
    rate = dq > 0 ? dh / dq : dq < 0 ? total : null;
  }
  return {
    prefix_cache_hit_rate: rate,
    prefix_cache_hit_rate_total: total,
    engine_running: first(m, ['vllm:num_requests_running', 'sglang:num_running_reqs']) ?? null,
    engine_waiting: first(m, ['vllm:num_requests_waiting', 'sglang:num_queue_reqs']) ?? null,
    kv_cache_usage: first(m, ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc', 'sglang:token_usage']) ?? null,
    counters,
  };
}

/** Reads a /metrics text (a test may serve its own). */
export type MetricsReader = (address: string, signal: AbortSignal) => Promise<string>;

const httpReader: MetricsReader = async (address, signal) => {
  const r = await fetch(`${address}/metrics`, { signal });
  if (!r.ok) throw new Error(`GET ${address}/metrics answered ${r.status}`);
  return r.text();
};

/**
 * Reads each backend's /metrics every `everyS` seconds while someone looks (a console page, the
 * event stream's ticks): a server nobody watches sends its backends nothing extra.
 */
export class EngineStatsReader {
  private readonly stats = new Map<string, EngineStats & { counters?: { hits: number; queries: number } }>();
  private wantedAt = Number.NEGATIVE_INFINITY;
  private timer: unknown;
  private reading = false;
  private closed = false;

  constructor(
    private readonly o: {
      everyS: number;
      clock: Clock;
      wallNow: () => number;
      backends: () => string[];
      read?: MetricsReader;
      /** How long after the last look reads go on. */
      idleMs?: number;
    },
  ) {}

  /** The figures of a backend (unknown until a read answered). */
  of(address: string): EngineStats {
    const s = this.stats.get(address);
    if (!s) return UNKNOWN;
    const { counters: _c, ...rest } = s;
    return rest;
  }

  /** Someone looks: read now if no read ran recently, and keep reading while they do. */
  touch(): void {
    if (this.o.everyS <= 0 || this.closed) return;
    this.wantedAt = this.o.clock.now();
    if (this.timer === undefined && !this.reading) void this.round();
  }

  close(): void {
    this.closed = true;
    if (this.timer !== undefined) this.o.clock.clearTimeout(this.timer);
    this.timer = undefined;
  }

  private async round(): Promise<void> {
    this.reading = true;
    const read = this.o.read ?? httpReader;
    const addresses = this.o.backends();
    for (const k of this.stats.keys()) if (!addresses.includes(k)) this.stats.delete(k);
    await Promise.all(
      addresses.map(async (a) => {
        const prev = this.stats.get(a);
        try {
          const text = await read(a, AbortSignal.timeout(Math.min(5_000, Math.max(1_000, this.o.everyS * 1000))));
          this.stats.set(a, { ...engineFigures(parsePrometheus(text), prev?.counters), metrics_at: this.o.wallNow(), metrics_error: null });
        } catch (err) {
          this.stats.set(a, { ...(prev ?? UNKNOWN), metrics_error: err instanceof Error ? err.message : String(err) });
        }
      }),
    );
    this.reading = false;
    if (this.closed || this.o.clock.now() - this.wantedAt > (this.o.idleMs ?? 30_000)) return;
    this.timer = this.o.clock.setTimeout(() => {
      this.timer = undefined;
      void this.round();
    }, this.o.everyS * 1000);
    (this.timer as { unref?: () => void }).unref?.();
  }
}
