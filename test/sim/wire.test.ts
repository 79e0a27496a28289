import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { qwen3Tokenizer } from '../../src/tokens/index.js';

// The prompt of wire-formats.md §1 (real Qwen3 ids, thinking off).
const PROMPT = [151644, 872, 198, 3838, 374, 220, 17, 10, 17, 30, 151645, 198, 151644, 77091, 198, 151667, 271, 151668, 271];
const IM_END = 151645;

async function post(url: string, body: unknown): Promise<{ status: number; json: any }> {
  const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await r.text();
  return { status: r.status, json: text ? JSON.parse(text) : null };
}

describe('simulated backend wire formats (real sim on port 0)', () => {
  let sim: SimHandle;
  beforeAll(async () => {
    sim = await startSim({ seed: 7, max_model_len: 4096, request_log: 100 });
  });
  afterAll(async () => {
    await sim.close();
    await sim.close(); // safe twice
  });

  const completion = (extra: Record<string, unknown> = {}): Promise<{ status: number; json: any }> =>
    post(`${sim.url}/v1/completions`, {
      model: 'Qwen/Qwen3-8B',
      prompt: PROMPT,
      max_tokens: 512,
      seed: 1234,
      logprobs: 0,
      return_token_ids: true,
      return_tokens_as_token_ids: true,
      skip_special_tokens: false,
      stop_token_ids: [151645, 151643],
      ...extra,
    });

  it('vLLM /v1/completions answers token ids, "token_id:N" logprobs and a stop on <|im_end|>', async () => {
    const { status, json } = await completion();
    expect(status).toBe(200);
    expect(json.object).toBe('text_completion');
    expect(json.id).toMatch(/^cmpl-/);
    const c = json.choices[0];
    expect(c.finish_reason).toBe('stop');
    expect(c.stop_reason).toBeNull(); // eos, even though it is in stop_token_ids
    expect(c.token_ids.at(-1)).toBe(IM_END);
    expect(c.prompt_token_ids).toEqual(PROMPT);
    expect(c.logprobs.tokens).toEqual(c.token_ids.map((id: number) => `token_id:${id}`));
    expect(c.logprobs.token_logprobs).toHaveLength(c.token_ids.length);
    expect(c.logprobs.top_logprobs[0]).toEqual({ [`token_id:${c.token_ids[0]}`]: c.logprobs.token_logprobs[0] });
    for (const lp of c.logprobs.token_logprobs) expect(lp).toBeLessThanOrEqual(0);
    // The stop token leaves the text, which decodes the other ids.
    expect(c.text).toBe(qwen3Tokenizer().decode(c.token_ids.slice(0, -1)));
    expect(json.usage).toEqual({
      prompt_tokens: PROMPT.length,
      completion_tokens: c.token_ids.length,
      total_tokens: PROMPT.length + c.token_ids.length,
      prompt_tokens_details: null,
    });
  });

  it('a seed reproduces the same answer; another seed gives another', async () => {
    const a = (await completion()).json.choices[0];
    const b = (await completion()).json.choices[0];
    const c = (await completion({ seed: 99 })).json.choices[0];
    expect(b.token_ids).toEqual(a.token_ids);
    expect(b.logprobs.token_logprobs).toEqual(a.logprobs.token_logprobs);
    expect(c.token_ids).not.toEqual(a.token_ids);
  });

  it('max_tokens cuts with finish_reason length; max_tokens defaults to 16', async () => {
    const cut = (await completion({ max_tokens: 3 })).json.choices[0];
    expect(cut.finish_reason).toBe('length');
    expect(cut.stop_reason).toBeNull();
    expect(cut.token_ids).toHaveLength(3);
    const dflt = await post(`${sim.url}/v1/completions`, { prompt: PROMPT, seed: 5, return_token_ids: true });
    expect(dflt.json.choices[0].token_ids.length).toBeLessThanOrEqual(16);
    expect(dflt.json.choices[0].logprobs).toBeNull();
  });

  it('a non-eos stop id is echoed in stop_reason and kept in token_ids', async () => {
    const full = (await completion()).json.choices[0].token_ids as number[];
    const stopId = full[2]!;
    const c = (await completion({ stop_token_ids: [stopId] })).json.choices[0];
    expect(c.finish_reason).toBe('stop');
    expect(c.token_ids).toEqual(full.slice(0, full.indexOf(stopId) + 1));
    expect(c.stop_reason).toBe(stopId);
  });

  it("context overflow answers 400 in vLLM's error shape", async () => {
    const tooMuch = await completion({ max_tokens: 4096 });
    expect(tooMuch.status).toBe(400);
    expect(tooMuch.json.error).toMatchObject({ type: 'BadRequestError', code: 400 });
    expect(tooMuch.json.error.message).toMatch(/maximum context length|context length is only|maximum model length/);
    const longPrompt = await completion({ prompt: new Array(4096).fill(198), max_tokens: 1 });
    expect(longPrompt.status).toBe(400);
    expect(longPrompt.json.error.param).toBe('input_tokens');
    const bad = await post(`${sim.url}/v1/completions`, { prompt: [-1] });
    expect(bad.status).toBe(400);
    expect(bad.json.error.code).toBe(400);
  });

  it('SGLang /generate answers output_ids, logprob tuples and finish_reason objects', async () => {
    const body = {
      input_ids: PROMPT,
      sampling_params: {
        max_new_tokens: 512,
        stop_token_ids: [IM_END],
        skip_special_tokens: false,
        no_stop_trim: true,
        sampling_seed: 1234,
      },
      return_logprob: true,
      rid: 'r-1',
    };
    const { status, json } = await post(`${sim.url}/generate`, body);
    expect(status).toBe(200);
    expect(json.output_ids.at(-1)).toBe(IM_END);
    expect(json.text).toBe(qwen3Tokenizer().decode(json.output_ids));
    expect(json.meta_info).toMatchObject({
      id: 'r-1',
      finish_reason: { type: 'stop', matched: IM_END },
      prompt_tokens: PROMPT.length,
      weight_version: 'default',
      completion_tokens: json.output_ids.length,
    });
    expect(json.meta_info.output_token_logprobs.map((t: unknown[]) => t[1])).toEqual(json.output_ids);
    expect(json.meta_info.output_token_logprobs[0][2]).toBeNull();
    const len = await post(`${sim.url}/generate`, { ...body, sampling_params: { ...body.sampling_params, max_new_tokens: 2 } });
    expect(len.json.meta_info.finish_reason).toEqual({ type: 'length', length: 2 });
    const over = await post(`${sim.url}/generate`, { ...body, sampling_params: { max_new_tokens: 5000 } });
    expect(over.status).toBe(400);
    expect(over.json.error.message).toMatch(/maximum context length/);
  });

  it('/health, /v1/models with max_model_len, /metrics with vLLM names and prefix-cache counters', async () => {
    expect((await fetch(`${sim.url}/health`)).status).toBe(200);
    const models = await (await fetch(`${sim.url}/v1/models`)).json();
    expect(models.data[0]).toMatchObject({ id: 'Qwen/Qwen3-8B', object: 'model', max_model_len: 4096 });
    const metrics = await (await fetch(`${sim.url}/metrics`)).text();
    for (const name of [
      'vllm:num_requests_running{',
      'vllm:num_requests_waiting{',
      'vllm:prefix_cache_queries_total{',
      'vllm:prefix_cache_hits_total{',
    ])
      expect(metrics).toContain(name);
    // The same 19-token prompt was sent many times: its first 16-token block hits from the 2nd request on.
    const hits = Number(/vllm:prefix_cache_hits_total\{[^}]*\} (\d+)/.exec(metrics)![1]);
    expect(hits).toBeGreaterThanOrEqual(16);
  });

  it('logs what it sent for fidelity checks', async () => {
    const { json } = await completion({ seed: 4242 });
    const entry = sim.requestLog.at(-1)!;
    expect(entry.ids).toEqual(json.choices[0].token_ids);
    expect(entry.logprobs).toEqual(json.choices[0].logprobs.token_logprobs);
    expect(entry.prompt_ids).toEqual(PROMPT);
  });
});
