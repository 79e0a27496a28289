import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAgent, type AgentOptions } from '../../src/server/agent/index.js';
import { TimeoutError } from '../../src/protocol/errors.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { qwen3Tokenizer } from '../../src/tokens/index.js';
import { SimSession } from './sim-session.js';
import { untilRunning } from '../sim/helpers.js';

const tok = qwen3Tokenizer();

// A slow backend: every turn is 400-500 tokens at 1 ms per token, so a weight update or a cancel
// lands in the middle of a turn.
const SLOW = {
  seed: 9,
  request_log: 100,
  latency: { decode_ms_per_token: 1 },
  filler: { median_tokens: 450, sigma: 0.1, min_tokens: 400, max_tokens: 500 },
};

function opts(sim: SimHandle, signal: AbortSignal, api: 'vllm' | 'sglang' = 'sglang'): AgentOptions {
  return {
    llm: new SimSession(sim.url, api, 5),
    tokenizer: tok,
    messages: [{ role: 'user', content: 'talk to me' }],
    tools: [],
    execute: async () => ({ observation: '' }),
    samplingParams: { max_iterations: 2, max_tokens_per_turn: 1000 },
    signal,
    onNoToolCall: () => 'go on',
  };
}

const post = (url: string, body: unknown): Promise<Response> =>
  fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

describe('agent and backend aborts (real simulator with decode latency)', () => {
  let sim: SimHandle;
  beforeAll(async () => {
    sim = await startSim(SLOW);
  });
  afterAll(() => sim.close());

  for (const api of ['sglang', 'vllm'] as const) {
    it(`continues a turn the backend aborts for a weight update, recording each part's version (${api})`, async () => {
      const before = sim.requestLog.length;
      const run = runAgent(opts(sim, new AbortController().signal, api));
      await untilRunning(sim.url, 1);
      const version = `v-${api}`;
      const upd = await post(`${sim.url}/finish_weight_update`, { weight_version: version });
      expect(upd.status).toBe(200);
      const t = await run;
      const sent = sim.requestLog.slice(before);
      expect(sent[0]!.finish).toBe('abort');
      expect(sent[0]!.ids.length).toBeGreaterThan(0);
      // The continuation re-sends prompt + ids so far, with max_tokens reduced by what was generated.
      expect(sent[1]!.prompt_ids).toEqual([...sent[0]!.prompt_ids, ...sent[0]!.ids]);
      expect(sent[1]!.max_tokens).toBe(sent[0]!.max_tokens - sent[0]!.ids.length);
      const turn0 = t.turns[0]!;
      expect(turn0.parts.map((p) => p.finish_reason)).toEqual(['abort', 'stop']);
      expect(turn0.parts[1]!.weight_version).toBe(version);
      expect(turn0.parts[0]!.weight_version).not.toBe(version);
      // The turn is one assistant message whose ids are both parts, unchanged.
      expect(t.messages[1]!.token_ids).toEqual([...sent[0]!.ids, ...sent[1]!.ids]);
      expect(t.messages[1]!.logprobs).toEqual([...sent[0]!.logprobs, ...sent[1]!.logprobs]);
      expect(t.num_turns).toBe(2);
      expect(t.weight_versions).toEqual([turn0.weight_version, version]);
      // The continuation finishes the very response the aborted call was producing.
      const again = (await (
        await post(`${sim.url}/generate`, {
          input_ids: sent[0]!.prompt_ids,
          sampling_params: { max_new_tokens: sent[0]!.max_tokens, sampling_seed: sent[0]!.seed },
        })
      ).json()) as { output_ids: number[] };
      expect(t.messages[1]!.token_ids).toEqual(again.output_ids);
    });
  }

  it('SGLang /abort_request by rid cuts a request with finish_reason abort', async () => {
    const gen = post(`${sim.url}/generate`, {
      input_ids: [1, 2, 3],
      rid: 'cut-me',
      sampling_params: { max_new_tokens: 500, sampling_seed: 1 },
    });
    await untilRunning(sim.url, 1);
    expect((await post(`${sim.url}/abort_request`, { rid: 'cut-me' })).status).toBe(200);
    const j = (await (await gen).json()) as any;
    expect(j.meta_info.finish_reason.type).toBe('abort');
    expect(j.output_ids.length).toBeLessThan(200);
  });

  it('cancellation resolves with the trajectory so far (cancelled / timeout)', async () => {
    const ctrl = new AbortController();
    const run = runAgent(opts(sim, ctrl.signal));
    await untilRunning(sim.url, 1);
    ctrl.abort();
    const t = await run;
    expect(t.finish_reason).toBe('cancelled');
    expect(t.messages[0]).toMatchObject({ role: 'user', content: 'talk to me' });
    expect(t.tokens.prompt_ids.length).toBeGreaterThan(0);

    const ctrl2 = new AbortController();
    const run2 = runAgent(opts(sim, ctrl2.signal));
    await untilRunning(sim.url, 1);
    ctrl2.abort(new TimeoutError('job timed out'));
    expect((await run2).finish_reason).toBe('timeout');
    // The backend stops generating for a client that left.
    await untilRunning(sim.url, 0);
  });
});
