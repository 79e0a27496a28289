import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { SimEngine, type SimOutput } from '../../src/sim/engine.js';
import { SimOptions } from '../../src/sim/options.js';
import { PrefixCache } from '../../src/sim/prefix-cache.js';
import { readSimConfig } from '../../src/sim/cli.js';
import { startSim, parseMetrics } from '../../src/sim/index.js';
import type { PolicyContext } from '../../src/sim/policy.js';
import { qwen3Tokenizer } from '../../src/tokens/index.js';
import type { Clock } from '../../src/util/clock.js';
import { untilRunning } from './helpers.js';

const tok = qwen3Tokenizer();
// Reads the (faked) timers at call time, so vi.useFakeTimers() drives the latency model.
const fakeable: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as never),
};
const ids = (n: number, from = 1000): number[] => Array.from({ length: n }, (_, i) => from + i);

describe('PrefixCache', () => {
  it('hits only whole 16-token blocks of a matching prefix, and evicts the least recently used', () => {
    const c = new PrefixCache(4);
    expect(c.lookup(ids(40))).toBe(0);
    c.insert(ids(40)); // 2 full blocks; the last 8 ids are not a block
    expect(c.lookup(ids(40))).toBe(32);
    expect(c.lookup([...ids(16), ...ids(30, 5000)])).toBe(16); // the second block's prefix differs
    expect(c.lookup([1, ...ids(40)])).toBe(0); // a different first id changes every block
    c.insert(ids(48, 7000)); // 3 more blocks: capacity 4, so the oldest go
    expect(c.size).toBe(4);
    expect(c.lookup(ids(48, 7000))).toBe(48);
  });
});

describe('latency model (fake timers)', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  const engine = (latency: Record<string, number>, extra: Record<string, unknown> = {}): SimEngine =>
    new SimEngine(SimOptions.parse({ latency, filler: { median_tokens: 10, sigma: 0, min_tokens: 10 }, ...extra }), tok, [], fakeable);
  const req = (prompt: number[], id = 'r', max_tokens = 100) => ({
    api: 'vllm' as const,
    request_id: id,
    prompt_ids: prompt,
    max_tokens,
    seed: 1,
    stop_token_ids: [],
  });

  it('charges overhead + uncached prefill + decode, and prefill only for what the prefix cache misses', async () => {
    const e = engine({ overhead_ms: 5, prefill_ms_per_token: 1, decode_ms_per_token: 2 });
    let out: SimOutput | undefined;
    void e.generate(req(ids(64))).then((o) => (out = o));
    await vi.advanceTimersByTimeAsync(5 + 64 + 11 * 2 - 1);
    expect(out).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(out!.ids).toHaveLength(11);
    out = undefined;
    void e.generate(req(ids(64), 'r2')).then((o) => (out = o));
    await vi.advanceTimersByTimeAsync(5 + 22);
    expect(out!.cached_tokens).toBe(64);
    expect(e.counters).toMatchObject({ prefix_cache_queries: 128, prefix_cache_hits: 64 });
  });

  it('prefills one request at a time per backend', async () => {
    const e = engine({ prefill_ms_per_token: 1 });
    const done: string[] = [];
    void e.generate(req(ids(50), 'a')).then(() => done.push('a'));
    void e.generate(req(ids(30, 9000), 'b')).then(() => done.push('b'));
    await vi.advanceTimersByTimeAsync(50);
    expect(done).toEqual(['a']);
    await vi.advanceTimersByTimeAsync(29);
    expect(done).toEqual(['a']);
    await vi.advanceTimersByTimeAsync(1);
    expect(done).toEqual(['a', 'b']);
  });

  it('slows decode with concurrency and queues past max_num_seqs', async () => {
    const e = engine({ decode_ms_per_token: 2, concurrency_slowdown: 0.5, max_num_seqs: 2 });
    const done: string[] = [];
    for (const id of ['a', 'b', 'c']) void e.generate(req(ids(8), id)).then(() => done.push(id));
    await vi.advanceTimersByTimeAsync(0);
    expect([e.running, e.waiting]).toEqual([2, 1]);
    // Two running: 2 ms × 1.5 per token for 11 tokens = 33 ms.
    await vi.advanceTimersByTimeAsync(32);
    expect(done).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(done.sort()).toEqual(['a', 'b']);
    expect([e.running, e.waiting]).toEqual([1, 0]);
    // c took a's slot while b was still running: its rate is read per 16-token chunk, at 2 running.
    await vi.advanceTimersByTimeAsync(32);
    expect(done).not.toContain('c');
    await vi.advanceTimersByTimeAsync(1);
    expect(done).toContain('c');
  });

  it('a weight update aborts in-flight requests with the ids generated so far', async () => {
    const e = engine({ decode_ms_per_token: 2 });
    let out: SimOutput | undefined;
    void e.generate(req(ids(8))).then((o) => (out = o));
    await vi.advanceTimersByTimeAsync(9);
    expect(e.updateWeights('v7')).toEqual({ aborted: 1 });
    await vi.advanceTimersByTimeAsync(0);
    expect(out).toMatchObject({ finish: 'abort', weight_version: 'default' });
    expect(out!.ids).toHaveLength(4);
    expect(e.weightVersion).toBe('v7');
  });

  it('with abort_on_weight_update false, requests run through an update', async () => {
    const e = engine({ decode_ms_per_token: 2 }, { abort_on_weight_update: false });
    let out: SimOutput | undefined;
    void e.generate(req(ids(8))).then((o) => (out = o));
    await vi.advanceTimersByTimeAsync(5);
    expect(e.updateWeights(undefined)).toEqual({ aborted: 0 });
    await vi.advanceTimersByTimeAsync(20);
    expect(out).toMatchObject({ finish: 'stop' });
    expect(e.weightVersion).toBe('1');
  });
});

describe('weight updates over HTTP', () => {
  it('SGLang /update_weights_from_disk and vLLM /finish_weight_update set the version; policies see the updates', async () => {
    const seen: PolicyContext[] = [];
    const sim = await startSim(
      { boost_per_update: 0.05, latency: { decode_ms_per_token: 2 }, filler: { median_tokens: 300, sigma: 0, max_tokens: 300 } },
      { policies: [{ name: 'spy', respond: (ctx) => void seen.push(ctx) }] },
    );
    try {
      const post = (p: string, body: unknown): Promise<Response> =>
        fetch(`${sim.url}${p}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      const inflight = post('/generate', { input_ids: [1, 2, 3], sampling_params: { max_new_tokens: 400 } });
      await untilRunning(sim.url, 1);
      const upd = await post('/update_weights_from_disk', { model_path: '/ckpt/step-1', weight_version: 'step-1' });
      expect(await upd.json()).toMatchObject({ success: true, num_paused_requests: 1 });
      const cut = (await (await inflight).json()) as any;
      expect(cut.meta_info.finish_reason.type).toBe('abort');
      expect(cut.meta_info.weight_version).toBe('default');
      expect((await post('/update_weights_from_disk', {})).status).toBe(400);
      await post('/finish_weight_update', { weight_version: 'step-2' });
      expect(await (await fetch(`${sim.url}/get_weight_version`)).json()).toEqual({ weight_version: 'step-2' });
      const after = (await (await post('/generate', { input_ids: [1, 2, 3], sampling_params: { max_new_tokens: 1 } })).json()) as any;
      expect(after.meta_info.weight_version).toBe('step-2');
      expect(seen.at(-1)).toMatchObject({ weightVersion: 'step-2', updates: 2, boostPerUpdate: 0.05 });
      expect(seen[0]).toMatchObject({ weightVersion: 'default', updates: 0 });
      const m = parseMetrics(await (await fetch(`${sim.url}/metrics`)).text());
      expect(m['vllm:num_requests_running']).toBe(0);
      expect(m['vllm:prefix_cache_queries_total']).toBe(6);
    } finally {
      await sim.close();
    }
  });
});

describe('raas sim-llm --config', () => {
  it('reads the YAML keys of SimOptions (also nested under sim:)', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'raas-sim-'));
    try {
      const f = path.join(dir, 'sim.yaml');
      writeFileSync(f, 'sim:\n  seed: 3\n  max_model_len: 8192\n  datasets: [data/math.jsonl]\n  latency:\n    decode_ms_per_token: 1.5\n');
      const opts = readSimConfig(f);
      expect(opts.datasets).toEqual([path.join(dir, 'data/math.jsonl')]);
      expect(SimOptions.parse(opts)).toMatchObject({
        seed: 3,
        max_model_len: 8192,
        latency: { decode_ms_per_token: 1.5, prefill_ms_per_token: 0 },
      });
      expect(() => readSimConfig(path.join(dir, 'none.yaml'))).toThrow(/cannot read --config/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
