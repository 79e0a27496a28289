import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHAT_USER_MESSAGE, startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { nextMaxTokens, lengthLimits } from '../../src/server/llm/limits.js';
import { qwen3Tokenizer } from '../../src/tokens/tokenizer.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { rng, seedOf } from '../../src/util/hash.js';
import { post } from './helpers.js';

// The built-in chat handler end to end: real rollout server, real simulated vLLM and SGLang backends.
describe('chat handler', () => {
  let vllm: SimHandle;
  let sglang: SimHandle;
  let srv: RolloutServer;
  const tok = qwen3Tokenizer();
  const chat = (instance: Record<string, unknown>, sampling: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) =>
    post(`${srv.url}/process`, { instance: { data_source: 'chat', ...instance }, sampling_params: sampling, ...extra });

  beforeAll(async () => {
    vllm = await startSim({
      seed: 1,
      request_log: 100,
      max_model_len: 400,
      weight_version: 'sim-v',
      filler: { median_tokens: 12, sigma: 0.2, max_tokens: 30 },
    });
    sglang = await startSim({ seed: 2, request_log: 100, filler: { median_tokens: 12, sigma: 0.2, max_tokens: 30 } });
    srv = await startRolloutServer({ port: 0, log_level: 'silent', llm: { routing: 'round_robin' } });
  }, 60_000);
  afterAll(async () => {
    await srv?.close();
    await vllm?.close();
    await sglang?.close();
  });

  it.each(['vllm', 'sglang'] as const)('appends the model ids unchanged and the observation from the template (%s)', async (api) => {
    await post(`${srv.url}/clear_llm_server`);
    const sim = api === 'vllm' ? vllm : sglang;
    await post(`${srv.url}/add_llm_server`, { address: sim.url, api, weight_version: 'w7' });
    const before = sim.requestLog.length;
    const r = (
      await chat({ instance_id: 'c1', turns: 3 }, { max_tokens_per_turn: 40, return_message_ids: true }, { job_id: `chat-${api}` })
    ).body;
    expect(r).toMatchObject({ critical_error: null, finish_reason: 'finish', num_turns: 3, weight_versions: ['w7', 'w7', 'w7'] });
    const prompt = tok.renderPrompt([{ role: 'user', content: CHAT_USER_MESSAGE }], { enableThinking: false });
    expect(r.tokens.prompt_ids).toEqual(prompt);
    const obs = tok.observationIds([{ role: 'user', content: CHAT_USER_MESSAGE }], { enableThinking: false });
    const sent = sim.requestLog.slice(before);
    expect(sent).toHaveLength(3);
    // Each next prompt is the previous prompt, the generated ids unchanged, and the observation.
    let expected = [...prompt];
    const assistants = r.messages.filter((m: { role: string }) => m.role === 'assistant');
    for (let t = 0; t < 3; t++) {
      expect(sent[t].prompt_ids).toEqual(expected);
      expect(assistants[t].input_ids).toEqual(expected);
      const ids = assistants[t].token_ids as number[];
      expect(ids.at(-1)).toBe(151645);
      expected = [...expected, ...ids, ...obs];
    }
    const whole = [...r.tokens.prompt_ids, ...r.tokens.response_ids];
    expect(whole).toEqual(expected.slice(0, whole.length));
    expect(r.tokens.response_mask).toHaveLength(r.tokens.response_ids.length);
    r.tokens.response_mask.forEach((m: number, i: number) => {
      if (m === 0) expect(r.tokens.logprobs[i]).toBe(0);
    });
    // Spans map every message after the prompt onto its ids.
    for (const s of r.tokens.spans) {
      const m = r.messages[s.message_index];
      if (m.role === 'assistant') expect(r.tokens.response_ids.slice(s.start, s.end)).toEqual(m.token_ids);
      else expect(r.tokens.response_ids.slice(s.start, s.end)).toEqual(obs);
    }
    // Requests carry the per-turn seeds, all distinct.
    expect(new Set(sent.map((e) => e.seed)).size).toBe(3);
  });

  it('draws reward 1 with probability pass_rate from the job seed', async () => {
    await post(`${srv.url}/clear_llm_server`);
    await post(`${srv.url}/add_llm_server`, { address: sglang.url, api: 'sglang' });
    const run = (rate: number, k: number) =>
      chat({ instance_id: `p${k}`, turns: 1, pass_rate: rate }, { max_tokens_per_turn: 4, seed: 0 }, { job_id: `rate-${rate}-${k}` });
    const half = await Promise.all(Array.from({ length: 60 }, (_, k) => run(0.5, k)));
    const mean = half.reduce((s, a) => s + a.body.reward, 0) / half.length;
    expect(mean).toBeGreaterThan(0.25);
    expect(mean).toBeLessThan(0.75);
    for (const a of half) expect(a.body.resolved).toBe(a.body.reward === 1);
    expect((await run(1, 0)).body.reward).toBe(1);
    expect((await run(0, 0)).body.reward).toBe(0);
    // With sampling_params.seed the draw is the job seed's, hash(seed, job id): a rerun of a job is reproducible.
    half.forEach((a, k) => expect(a.body.reward).toBe(rng(seedOf(seedOf(0, `rate-0.5-${k}`), 'chat-eval'))() < 0.5 ? 1 : 0));
  });

  it('ends normally at max_response_tokens and at max_model_len', async () => {
    await post(`${srv.url}/clear_llm_server`);
    await post(`${srv.url}/add_llm_server`, { address: vllm.url });
    const capped = (await chat({ turns: 10 }, { max_tokens_per_turn: 8, max_response_tokens: 20 })).body;
    expect(capped).toMatchObject({ critical_error: null, finish_reason: 'max_response_tokens', end_properly: true });
    const generated = capped.tokens.response_mask.filter((m: number) => m === 1).length;
    expect(generated).toBeLessThanOrEqual(20);
    // The vLLM sim has max_model_len 400 (read from /v1/models): the trajectory stops there.
    const full = (await chat({ turns: 50 }, { max_tokens_per_turn: 30 })).body;
    expect(full).toMatchObject({ critical_error: null, finish_reason: 'max_model_len' });
    expect(full.tokens.prompt_ids.length + full.tokens.response_ids.length).toBeLessThanOrEqual(400);
  });
});

describe('length limits', () => {
  it('clamps to the per-turn cap, the trajectory budget and the context, and names the finish', () => {
    const l = lengthLimits({ max_output_tokens: 50, max_response_tokens: 120 });
    expect(l).toEqual({ perTurn: 50, response: 120 });
    expect(lengthLimits({ max_tokens_per_turn: 7, max_output_tokens: 50 }).perTurn).toBe(7);
    expect(nextMaxTokens(l, 0, 10, 1000)).toEqual({ max_tokens: 50, cause: 'per_turn' });
    expect(nextMaxTokens(l, 100, 10, 1000)).toEqual({ max_tokens: 20, cause: 'response' });
    expect(nextMaxTokens(l, 0, 990, 1000)).toEqual({ max_tokens: 10, cause: 'model_len' });
    expect(nextMaxTokens(l, 120, 10, 1000)).toEqual({ finish: 'max_response_tokens' });
    expect(nextMaxTokens(l, 0, 1000, 1000)).toEqual({ finish: 'max_model_len' });
  });
});
