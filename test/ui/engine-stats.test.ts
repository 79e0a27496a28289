import { describe, expect, it } from 'vitest';
import { engineFigures, parsePrometheus } from '../../src/server/console/engine-stats.js';

// Metric names as the engines register them:
// vLLM vllm/v1/metrics/loggers.py@005a810bc40f: counters vllm:prefix_cache_queries and
// vllm:prefix_cache_hits (prometheus_client exposes them with _total; the deprecated
// vllm:gpu_prefix_cache_* pair is the same figure), gauges vllm:num_requests_running,
// vllm:num_requests_waiting, vllm:kv_cache_usage_perc.
// SGLang python/sglang/srt/metrics/collector.py@00ae9c1590d2: gauges sglang:cache_hit_rate,
// sglang:num_running_reqs, sglang:num_queue_reqs, sglang:token_usage.
const VLLM = (
  hits: number,
  queries: number,
) => `# HELP vllm:prefix_cache_queries Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} ${queries / 2}
vllm:prefix_cache_queries_total{engine="1",model_name="m"} ${queries / 2}
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} ${hits}
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_waiting{engine="0",model_name="m"} 1.0
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
`;

describe('engine figures from a backend /metrics', () => {
  it("reads vLLM's counters: the hit rate over the interval and since the start, summed over engines", () => {
    const first = engineFigures(parsePrometheus(VLLM(50, 100)), undefined);
    expect(first).toMatchObject({
      prefix_cache_hit_rate: 0.5,
      prefix_cache_hit_rate_total: 0.5,
      engine_running: 3,
      engine_waiting: 1,
      kv_cache_usage: 0.25,
    });
    const next = engineFigures(parsePrometheus(VLLM(140, 200)), first.counters);
    // 90 of the 100 tokens queried since the last read hit the cache.
    expect(next.prefix_cache_hit_rate).toBeCloseTo(0.9);
    expect(next.prefix_cache_hit_rate_total).toBeCloseTo(0.7);
    // A restarted engine: its counters start again, the interval rate is its whole life.
    const restarted = engineFigures(parsePrometheus(VLLM(3, 10)), next.counters);
    expect(restarted.prefix_cache_hit_rate).toBeCloseTo(0.3);
  });

  it("reads SGLang's hit-rate gauge and load gauges", () => {
    const text = `sglang:cache_hit_rate{model_name="m"} 0.93\nsglang:num_running_reqs{model_name="m"} 2.0\nsglang:num_queue_reqs{model_name="m"} 5.0\nsglang:token_usage{model_name="m"} 0.28\n`;
    expect(engineFigures(parsePrometheus(text), undefined)).toMatchObject({
      prefix_cache_hit_rate: 0.93,
      prefix_cache_hit_rate_total: null,
      engine_running: 2,
      engine_waiting: 5,
      kv_cache_usage: 0.28,
    });
  });

  it('says unknown (null) for what a backend does not expose', () => {
    expect(engineFigures(parsePrometheus('# nothing\nup 1\n'), undefined)).toMatchObject({
      prefix_cache_hit_rate: null,
      engine_running: null,
      kv_cache_usage: null,
    });
  });
});
