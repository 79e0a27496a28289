import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { post } from '../server/helpers.js';

/**
 * The sampling parameters raas forwards, seen on the wire by the simulated backend (real HTTP), in
 * vLLM's /v1/completions names (vllm/entrypoints/openai/protocol.py@ec3b890, CompletionRequest's
 * completion-sampling-params block; structured_outputs for regex/json/grammar) and in SGLang's
 * sampling_params names (python/sglang/srt/sampling/sampling_params.py@0bebedd:31-56: min_new_tokens,
 * json_schema as a string, ebnf, custom_params).
 */
describe('sampling parameters reach vLLM and SGLang under their own names', () => {
  let sim: SimHandle;
  let srv: RolloutServer;

  beforeAll(async () => {
    sim = await startSim({ seed: 3, request_log: 50, filler: { median_tokens: 6, sigma: 0.1, max_tokens: 10 } });
    srv = await startRolloutServer({ port: 0, log_level: 'silent' });
  }, 60_000);
  afterAll(async () => {
    await srv?.close();
    await sim?.close();
  });

  async function run(
    api: 'vllm' | 'sglang',
    sampling: Record<string, unknown>,
    id: string,
  ): Promise<{ result: any; sent: Record<string, unknown> | undefined }> {
    await post(`${srv.url}/clear_llm_server`);
    await post(`${srv.url}/add_llm_server`, { address: sim.url, api, probe: false });
    const before = sim.requestLog.length;
    const r = await post(`${srv.url}/process`, {
      instance: { data_source: 'chat', instance_id: id, turns: 1 },
      sampling_params: { max_tokens_per_turn: 16, ...sampling },
      job_id: id,
    });
    expect(r.status).toBe(200);
    return { result: r.body, sent: sim.requestLog.slice(before)[0]?.sampling };
  }

  const common = {
    repetition_penalty: 1.1,
    min_p: 0.05,
    presence_penalty: 0.5,
    frequency_penalty: -0.25,
    min_tokens: 2,
    ignore_eos: false,
    stop: ['###'],
    logit_bias: { '151645': -1 },
  };

  it('vLLM: the /v1/completions fields, structured outputs under structured_outputs', async () => {
    const { result, sent } = await run('vllm', { ...common, allowed_token_ids: [1, 2, 151645], regex: '[0-9]+' }, 'fwd-vllm');
    expect(result.error, String(result.error).slice(0, 600)).toBeNull();
    expect(sent).toEqual({ ...common, allowed_token_ids: [1, 2, 151645], structured_outputs: { regex: '[0-9]+' } });
  });

  it('SGLang: the sampling_params fields (min_new_tokens, json_schema as a string, custom_params)', async () => {
    const { result, sent } = await run('sglang', { ...common, json_schema: { type: 'object' }, custom_params: { k: 1 } }, 'fwd-sglang');
    expect(result.critical_error).toBeNull();
    const { min_tokens: _m, ...rest } = common;
    expect(sent).toEqual({ ...rest, min_new_tokens: 2, json_schema: '{"type":"object"}', custom_params: { k: 1 } });
  });

  it("min_tokens is capped at the call's max_tokens (both backends refuse more); SGLang's check is simulated", async () => {
    expect((await run('sglang', { min_tokens: 50 }, 'min-cap')).sent).toEqual({ min_new_tokens: 16 });
    const r = await fetch(`${sim.url}/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ input_ids: [1, 2], sampling_params: { max_new_tokens: 4, min_new_tokens: 5 } }),
    });
    expect(r.status).toBe(400);
    expect(((await r.json()) as { message: string }).message).toBe('min_new_tokens must be in [0, max_new_tokens(4)], got 5.');
  });

  it('extra_body passes through (SGLang: its sampling_params into ours); a typed field wins over it', async () => {
    // raas always sends vLLM `stop` (the configured stop strings, else []).
    expect((await run('vllm', { extra_body: { min_p: 0.2, presence_penalty: 1 }, presence_penalty: 0.5 }, 'extra-vllm')).sent).toEqual({
      min_p: 0.2,
      presence_penalty: 0.5,
      stop: [],
    });
    expect((await run('sglang', { extra_body: { sampling_params: { min_p: 0.3 } } }, 'extra-sglang')).sent).toEqual({ min_p: 0.3 });
  });

  it('a parameter the backend does not support fails the job with a message naming it', async () => {
    const { result, sent } = await run('vllm', { custom_params: { k: 1 } }, 'unsupported-vllm');
    expect(sent).toBeUndefined();
    expect(result.critical_error).toBe('run');
    expect(result.error).toContain('`sampling_params.custom_params`: vLLM does not support it (SGLang only)');
    const s = await run('sglang', { allowed_token_ids: [1] }, 'unsupported-sglang');
    expect(s.result.error).toContain('`sampling_params.allowed_token_ids`: SGLang does not support it (vLLM only)');
  });

  it('the simulator refuses what the backend refuses (vLLM: repetition_penalty in (0, 2])', async () => {
    const { result, sent } = await run('vllm', { extra_body: { repetition_penalty: 3 } }, 'out-of-range');
    expect(sent).toBeUndefined();
    expect(result.critical_error).toBe('run');
    expect(result.error).toMatch(/answered 400[\s\S]*repetition_penalty/);
  });

  it('/process refuses an out-of-range forwarded parameter with 400 naming it', async () => {
    const r = await post(`${srv.url}/process`, { instance: { data_source: 'chat', turns: 1 }, sampling_params: { min_p: 2 } });
    expect(r.status).toBe(400);
    expect(r.body.error.message).toMatch(/sampling_params\.min_p/);
  });
});
