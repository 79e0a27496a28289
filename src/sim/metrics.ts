import type { SimEngine } from './engine.js';

/**
 * Prometheus text with vLLM's metric names (V1, `vllm:` prefix, `model_name` and `engine` labels;
 * counters carry prometheus_client's `_total` suffix). Hit rate = Δhits / Δqueries, in tokens.
 */
export function renderMetrics(engine: SimEngine): string {
  const labels = `{engine="0",model_name="${engine.cfg.model.replace(/["\\\n]/g, '_')}"}`;
  const c = engine.counters;
  const lines: string[] = [];
  const metric = (name: string, type: 'gauge' | 'counter', help: string, value: number): void => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, `${type === 'counter' ? `${name}_total` : name}${labels} ${value}`);
  };
  metric('vllm:num_requests_running', 'gauge', 'Number of requests in model execution batches.', engine.running);
  metric('vllm:num_requests_waiting', 'gauge', 'Number of requests waiting to be processed.', engine.waiting);
  metric('vllm:kv_cache_usage_perc', 'gauge', 'KV-cache usage. 1 means 100 percent usage.', engine.cache.usage());
  metric('vllm:prefix_cache_queries', 'counter', 'Prefix cache queries, in terms of number of queried tokens.', c.prefix_cache_queries);
  metric('vllm:prefix_cache_hits', 'counter', 'Prefix cache hits, in terms of number of cached tokens.', c.prefix_cache_hits);
  metric('vllm:prompt_tokens', 'counter', 'Number of prefill tokens processed.', c.prompt_tokens);
  metric('vllm:generation_tokens', 'counter', 'Number of generation tokens processed.', c.generation_tokens);
  metric('vllm:request_success', 'counter', 'Count of finished requests.', c.requests);
  // Phase times as vLLM's histograms expose them (only _sum and _count: enough for means).
  const hist = (name: string, help: string, sum: number): void => {
    lines.push(
      `# HELP ${name} ${help}`,
      `# TYPE ${name} histogram`,
      `${name}_bucket{engine="0",le="+Inf",model_name="${engine.cfg.model}"} ${c.requests}`,
      `${name}_sum${labels} ${sum}`,
      `${name}_count${labels} ${c.requests}`,
    );
  };
  hist('vllm:request_queue_time_seconds', 'Time spent waiting for a running slot.', engine.seconds.queue);
  hist('vllm:request_prefill_time_seconds', 'Time spent in prefill (including waiting for the serial prefill).', engine.seconds.prefill);
  hist('vllm:request_decode_time_seconds', 'Time spent decoding.', engine.seconds.decode);
  hist('vllm:e2e_request_latency_seconds', 'End-to-end request latency.', engine.seconds.e2e);
  return `${lines.join('\n')}\n`;
}

/** Parses the counters and gauges of a Prometheus text (for benchmarks and tests reading /metrics). */
export function parseMetrics(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.trim() === '') continue;
    const m = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)$/.exec(line);
    if (m) out[m[1]!] = (out[m[1]!] ?? 0) + Number(m[3]);
  }
  return out;
}
