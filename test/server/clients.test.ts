import { afterAll, describe, expect, it } from 'vitest';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { ContextLengthError, RaasError } from '../../src/protocol/errors.js';
import { BackendPool, JobLlmSession, SglangClient, VllmClient } from '../../src/server/index.js';
import { defaultClientFactory } from '../../src/server/llm/pool.js';
import { systemClock } from '../../src/util/clock.js';
import { seedOf } from '../../src/util/hash.js';
import { LlmPoolConfig } from '../../src/protocol/config-server.js';
import { ManualClock } from './helpers.js';

// The recorded bodies of wire-formats.md, served by a real local HTTP server.
const PROMPT = [151644, 872, 198, 3838, 374, 220, 17, 10, 17, 30, 151645, 198, 151644, 77091, 198, 151667, 271, 151668, 271];
const COMPLETION = [151657, 198, 4913, 606, 788, 330, 26586, 497, 330, 16370, 788, 5212, 9413, 788, 330, 17, 10, 17, 95642, 151658, 151645];
const LOGPROBS = COMPLETION.map((_, i) => -0.001 * (i + 1));

const vllmAnswer = (opts: { tokenIds?: boolean; finish?: string } = {}) => ({
  id: 'cmpl-8c16f81d43846721',
  object: 'text_completion',
  created: 1772367069,
  model: 'Qwen/Qwen3-8B',
  choices: [
    {
      index: 0,
      text: '<tool_call>\n{"name": "calc", "arguments": {"expr": "2+2"}}\n</tool_call>',
      logprobs: {
        text_offset: COMPLETION.map((_, i) => i * 16),
        token_logprobs: LOGPROBS,
        tokens: COMPLETION.map((id) => `token_id:${id}`),
        top_logprobs: COMPLETION.map((id, i) => ({ [`token_id:${id}`]: LOGPROBS[i] })),
      },
      finish_reason: opts.finish ?? 'stop',
      stop_reason: null,
      ...(opts.tokenIds === false ? {} : { token_ids: COMPLETION }),
      prompt_logprobs: null,
      prompt_token_ids: PROMPT,
    },
  ],
  service_tier: null,
  system_fingerprint: null,
  usage: { prompt_tokens: 19, total_tokens: 40, completion_tokens: 21, prompt_tokens_details: null },
  kv_transfer_params: null,
});

const sglangAnswer = (finish: unknown = { type: 'stop', matched: 151645 }) => ({
  text: '<tool_call>\n{"name": "calc", "arguments": {"expr": "2+2"}}\n</tool_call><|im_end|>',
  output_ids: COMPLETION,
  meta_info: {
    id: 'rollout-17-turn-0',
    finish_reason: finish,
    prompt_tokens: 19,
    weight_version: 'default',
    completion_tokens: 21,
    cached_tokens: 0,
    input_token_logprobs: [],
    output_token_logprobs: COMPLETION.map((id, i) => [LOGPROBS[i], id, null]),
    e2e_latency: 0.41,
  },
});

const CONTEXT_400 = {
  error: {
    message:
      "This model's maximum context length is 40960 tokens. However, you requested 0 output tokens and your prompt contains at least 40961 input tokens, for a total of at least 40961 tokens. Please reduce the length of the input prompt or the number of requested output tokens. (parameter=input_tokens, value=40961)",
    type: 'BadRequestError',
    param: 'input_tokens',
    code: 400,
  },
};

interface Recorded {
  method: string;
  url: string;
  body: any;
}

/** A scripted backend: `reply` decides each answer; every request is recorded. */
async function backend(
  reply: (req: Recorded, n: number) => { status: number; body: unknown } | 'hangup',
): Promise<{ url: string; requests: Recorded[]; server: Server }> {
  const requests: Recorded[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let data = '';
    req.on('data', (c) => (data += c));
    req.on('end', () => {
      const rec = { method: req.method ?? '', url: req.url ?? '', body: data ? JSON.parse(data) : null };
      requests.push(rec);
      const out = reply(rec, requests.length);
      if (out === 'hangup') return req.socket.destroy();
      res.writeHead(out.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(out.body));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}`, requests, server };
}

describe('vLLM and SGLang token-in/token-out clients', () => {
  const servers: Server[] = [];
  const start = async (reply: Parameters<typeof backend>[0]) => {
    const b = await backend(reply);
    servers.push(b.server);
    return b;
  };
  afterAll(async () => {
    await Promise.all(
      servers.map(
        (s) =>
          new Promise((r) => {
            s.closeAllConnections();
            s.close(r);
          }),
      ),
    );
  });

  it('vLLM: sends the documented request and reads ids, logprobs and finish', async () => {
    const b = await start((r) =>
      r.url === '/v1/models'
        ? { status: 200, body: { object: 'list', data: [{ id: 'Qwen/Qwen3-8B', object: 'model', max_model_len: 40960 }] } }
        : { status: 200, body: vllmAnswer() },
    );
    const c = new VllmClient(`${b.url}/v1`);
    const r = await c.generate({
      prompt_ids: PROMPT,
      max_tokens: 256,
      stop_token_ids: [151645, 151643],
      seed: 1234,
      sampling: { temperature: 1.0, top_p: 1.0 },
      request_id: 'j-turn-0',
    });
    expect(r).toEqual({ ids: COMPLETION, logprobs: LOGPROBS, finish_reason: 'stop' });
    const sent = b.requests.find((q) => q.url === '/v1/completions')!;
    expect(sent.method).toBe('POST');
    expect(sent.body).toEqual({
      model: 'Qwen/Qwen3-8B',
      prompt: PROMPT,
      max_tokens: 256,
      temperature: 1.0,
      top_p: 1.0,
      n: 1,
      seed: 1234,
      logprobs: 0,
      return_tokens_as_token_ids: true,
      return_token_ids: true,
      skip_special_tokens: false,
      include_stop_str_in_output: false,
      stop: [],
      stop_token_ids: [151645, 151643],
      // vLLM's CompletionRequest takes the caller's request_id; its /abort_requests (pause with
      // mode abort) names requests by it.
      request_id: 'j-turn-0',
    });
    expect(await c.maxModelLen()).toBe(40960);
  });

  it('vLLM: parses "token_id:N" when token_ids is absent, and maps length/abort', async () => {
    let n = 0;
    const b = await start((r) =>
      r.url === '/v1/models'
        ? { status: 404, body: { detail: 'Not Found' } }
        : { status: 200, body: vllmAnswer({ tokenIds: false, finish: ['length', 'abort', 'repetition'][n++] }) },
    );
    const c = new VllmClient(b.url, { model: 'm' });
    const req = { prompt_ids: PROMPT, max_tokens: 5, seed: 1, sampling: {}, request_id: 'x' };
    const r1 = await c.generate(req);
    expect(r1.ids).toEqual(COMPLETION);
    expect(r1.finish_reason).toBe('length');
    expect((await c.generate(req)).finish_reason).toBe('abort');
    expect((await c.generate(req)).finish_reason).toBe('stop');
    expect(await c.maxModelLen()).toBeUndefined();
  });

  it('vLLM and SGLang: a context-length 400 is a ContextLengthError, other 4xx are not retryable', async () => {
    const b = await start((r) =>
      r.url.startsWith('/v1/completions') || r.url === '/generate'
        ? {
            status: 400,
            body:
              r.body?.max_tokens === 1 || r.body?.sampling_params?.max_new_tokens === 1
                ? { error: { message: 'bad temperature' } }
                : CONTEXT_400,
          }
        : { status: 404, body: {} },
    );
    const req = { prompt_ids: PROMPT, max_tokens: 8, seed: 1, sampling: {}, request_id: 'x' };
    await expect(new VllmClient(b.url, { model: 'm' }).generate(req)).rejects.toBeInstanceOf(ContextLengthError);
    await expect(new SglangClient(b.url).generate(req)).rejects.toBeInstanceOf(ContextLengthError);
    const other = await new VllmClient(b.url, { model: 'm' }).generate({ ...req, max_tokens: 1 }).catch((e) => e);
    expect(other).toBeInstanceOf(RaasError);
    expect(other.retryable).toBe(false);
    expect(other.message).toMatch(/bad temperature/);
  });

  it('SGLang: sends input_ids with sampling_seed and reads output_ids and logprob tuples', async () => {
    const finishes = [
      { type: 'stop', matched: 151645 },
      { type: 'length', length: 21 },
      { type: 'abort', message: 'weights updating' },
    ];
    const b = await start((_r, n) => ({ status: 200, body: sglangAnswer(finishes[(n - 1) % 3]) }));
    const c = new SglangClient(b.url);
    const r = await c.generate({
      prompt_ids: PROMPT,
      max_tokens: 256,
      stop_token_ids: [151645],
      seed: 1234,
      sampling: { temperature: 1.0, top_p: 1.0 },
      request_id: 'rollout-17-turn-0',
    });
    expect(r).toEqual({ ids: COMPLETION, logprobs: LOGPROBS, finish_reason: 'stop' });
    expect(b.requests[0].url).toBe('/generate');
    expect(b.requests[0].body).toEqual({
      input_ids: PROMPT,
      sampling_params: {
        max_new_tokens: 256,
        temperature: 1.0,
        top_p: 1.0,
        top_k: -1,
        stop_token_ids: [151645],
        skip_special_tokens: false,
        no_stop_trim: true,
        sampling_seed: 1234,
      },
      return_logprob: true,
      logprob_start_len: -1,
      top_logprobs_num: 0,
      return_text_in_logprobs: false,
      rid: 'rollout-17-turn-0',
      stream: false,
    });
    const req = { prompt_ids: PROMPT, max_tokens: 21, seed: 1, sampling: {}, request_id: 'y' };
    expect((await c.generate(req)).finish_reason).toBe('length');
    expect((await c.generate(req)).finish_reason).toBe('abort');
  });

  it('session: retries connection errors, then moves the job with its full prompt to a live backend; seeds per turn; weight_version per turn', async () => {
    const dead = await start(() => 'hangup');
    const live = await start((r) =>
      r.url === '/v1/models' ? { status: 200, body: { data: [{ id: 'm', max_model_len: 4096 }] } } : { status: 200, body: vllmAnswer() },
    );
    const cfg = LlmPoolConfig.parse({ retries: 2, backoff_base_ms: 1, backoff_max_ms: 5 });
    // A clock that is never advanced: no health probe runs, only the calls count toward the breaker.
    const pool = new BackendPool(cfg, defaultClientFactory({ model: 'm' }), () => 0.5, { clock: new ManualClock() });
    const moved: number[] = [];
    pool.add(dead.url, 'vllm', 'v-dead');
    const session = new JobLlmSession({
      pool,
      jobId: 'job-7',
      groupId: undefined,
      sampling: { seed: 9, max_model_len: 4096 },
      clock: systemClock,
      observer: { move: () => moved.push(1) },
    });
    session.bind();
    expect(session.backend).toBe(dead.url);
    pool.add(live.url, 'vllm', 'v1');
    const r = await session.generate({ prompt_ids: PROMPT, max_tokens: 10_000 });
    expect(dead.requests.length).toBe(3); // first try + 2 retries (the third failure also opens its breaker)
    expect(pool.get(dead.url)!.healthy).toBe(false);
    expect(r).toMatchObject({ ids: COMPLETION, weight_version: 'v1', backend: live.url });
    const sent = live.requests.find((q) => q.url === '/v1/completions')!.body;
    expect(sent.prompt).toEqual(PROMPT);
    expect(sent.seed).toBe(seedOf(9, 'job-7', 0));
    expect(sent.max_tokens).toBe(4096 - PROMPT.length); // clamped to what is left of max_model_len
    expect(moved).toHaveLength(1);
    expect(pool.moves).toBe(1);
    // Re-adding the address updates its weight_version; the next turn records it.
    pool.add(live.url, 'vllm', 'v2');
    await session.generate({ prompt_ids: [...PROMPT, ...COMPLETION], max_tokens: 8 });
    expect(live.requests.filter((q) => q.url === '/v1/completions').at(-1)!.body.seed).toBe(seedOf(9, 'job-7', 1));
    expect(session.turns).toEqual([
      { backend: live.url, weight_version: 'v1' },
      { backend: live.url, weight_version: 'v2' },
    ]);
    session.release();
    expect(pool.get(live.url)!.active).toBe(0);
    // No backend left: a typed error the pipeline turns into critical_error "run".
    pool.clear();
    const orphan = new JobLlmSession({ pool, jobId: 'job-8', groupId: undefined, sampling: {}, clock: systemClock });
    await expect(orphan.generate({ prompt_ids: PROMPT, max_tokens: 4 })).rejects.toMatchObject({ code: 'backend_unavailable' });
  });

  it('session: a removed backend keeps answering the jobs that hold it', async () => {
    const b = await start((r) =>
      r.url === '/v1/models' ? { status: 200, body: { data: [{ id: 'm' }] } } : { status: 200, body: vllmAnswer() },
    );
    const pool = new BackendPool(LlmPoolConfig.parse({}), defaultClientFactory({}));
    pool.add(b.url);
    const s = new JobLlmSession({ pool, jobId: 'j', groupId: undefined, sampling: {}, clock: systemClock });
    s.bind();
    pool.remove(b.url);
    expect(pool.size).toBe(0);
    expect((await s.generate({ prompt_ids: PROMPT, max_tokens: 4 })).backend).toBe(b.url);
    s.release();
  });

  it('server: a job whose only backend is down ends with critical_error "run"; a live one takes it over when registered', async () => {
    const { startRolloutServer } = await import('../../src/server/index.js');
    const dead = await start(() => 'hangup');
    const srv = await startRolloutServer({
      port: 0,
      log_level: 'silent',
      llm: { retries: 1, backoff_base_ms: 1, backoff_max_ms: 2, backends: [{ address: dead.url }] },
    });
    try {
      const body = { instance: { data_source: 'chat', turns: 1 }, sampling_params: { max_model_len: 4096 } };
      const r = await (
        await fetch(`${srv.url}/process`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
      ).json();
      expect(r).toMatchObject({ critical_error: 'run', success: false });
      expect(r.error).toMatch(/stopped answering|failed/);
      const live = await start((q) =>
        q.url === '/v1/models' ? { status: 200, body: { data: [{ id: 'm' }] } } : { status: 200, body: vllmAnswer() },
      );
      srv.pool.add(live.url);
      const moved = await (
        await fetch(`${srv.url}/process`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
      ).json();
      expect(moved.critical_error).toBeNull();
      const metrics = await (await fetch(`${srv.url}/metrics`)).text();
      expect(metrics).toMatch(/raas_jobs_total\{state="failed"\} 1/);
    } finally {
      await srv.close();
    }
  });
});
