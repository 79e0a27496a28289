// The HTTP layer under the LLM clients and the two clients' wire contracts, against real local HTTP
// servers: how each kind of answer maps onto a value or a typed error (retryable or not, context
// length), deadlines, probes, and the request bodies vLLM and SGLang get.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { afterAll, describe, expect, it } from 'vitest';
import { ContextLengthError, RaasError } from '../../src/protocol/errors.js';
import { BackendUnreachableError, getJson, isUnreachable, postJson, probe } from '../../src/server/llm/http.js';
import { SglangClient } from '../../src/server/llm/sglang.js';
import { VllmClient, parseTokenIdPlaceholder } from '../../src/server/llm/vllm.js';

type Answer = { status: number; body: string; type?: string } | 'hang' | 'hangup';
interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: any;
}

const servers: Server[] = [];
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

/** A local server answering each request as `reply` says; records what it got. */
async function serve(reply: (req: Seen) => Answer): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = createServer((req, res: ServerResponse) => {
    let data = '';
    req.on('data', (c) => (data += c));
    req.on('end', () => {
      const rec = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: data ? JSON.parse(data) : undefined };
      seen.push(rec);
      const a = reply(rec);
      if (a === 'hang') return;
      if (a === 'hangup') return req.socket.destroy();
      res.writeHead(a.status, { 'content-type': a.type ?? 'application/json' });
      res.end(a.body);
    });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, seen };
}
const json = (status: number, body: unknown): Answer => ({ status, body: JSON.stringify(body) });

/** A port nothing listens on. */
async function deadPort(): Promise<string> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return `http://127.0.0.1:${port}`;
}

async function failure(p: Promise<unknown>): Promise<RaasError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(RaasError);
  return err as RaasError;
}

describe('postJson / getJson', () => {
  it('sends JSON with its length and reads JSON back; an empty body is null', async () => {
    const b = await serve((r) => (r.url === '/empty' ? { status: 200, body: '' } : json(200, { got: r.body })));
    expect(await postJson(`${b.url}/x`, { a: 'é' }, undefined, 5_000)).toEqual({ got: { a: 'é' } });
    expect(b.seen[0].method).toBe('POST');
    expect(b.seen[0].headers['content-type']).toBe('application/json');
    expect(b.seen[0].headers['content-length']).toBe(String(Buffer.byteLength(JSON.stringify({ a: 'é' }))));
    expect(await getJson(`${b.url}/empty`, undefined, 5_000)).toBeNull();
    expect(b.seen[1].method).toBe('GET');
    expect(b.seen[1].headers.accept).toBe('application/json');
  });

  it('maps error answers: 5xx and 429 retryable, other 4xx not, each naming the URL, the status and the backend message', async () => {
    const bodies: Record<string, Answer> = {
      '/500': json(500, { error: { message: 'engine dead' } }),
      '/429': json(429, { message: 'slow down' }),
      '/404': json(404, { detail: 'Not Found' }),
      '/422': json(422, { detail: [{ loc: ['body', 'prompt'], msg: 'field required' }] }),
      '/400s': json(400, { error: 'bad thing' }),
      '/503t': { status: 503, body: 'upstream gone', type: 'text/plain' },
    };
    const b = await serve((r) => bodies[r.url]!);
    const e500 = await failure(postJson(`${b.url}/500`, {}, undefined, 5_000));
    expect([e500.code, e500.retryable, e500.status]).toEqual(['backend_unavailable', true, 502]);
    expect(e500.message).toBe(`LLM backend ${b.url}/500 answered 500: engine dead`);
    expect(isUnreachable(e500)).toBe(false); // an answer, however bad, is not a dead backend
    const e429 = await failure(postJson(`${b.url}/429`, {}, undefined, 5_000));
    expect([e429.retryable, e429.message]).toEqual([true, `LLM backend ${b.url}/429 answered 429: slow down`]);
    const e404 = await failure(getJson(`${b.url}/404`, undefined, 5_000));
    expect([e404.retryable, e404.message]).toEqual([false, `LLM backend ${b.url}/404 answered 404: Not Found`]);
    const e422 = await failure(getJson(`${b.url}/422`, undefined, 5_000));
    expect(e422.message).toContain('answered 422: [{"loc":["body","prompt"],"msg":"field required"}]');
    expect((await failure(getJson(`${b.url}/400s`, undefined, 5_000))).message).toContain('answered 400: bad thing');
    const e503 = await failure(getJson(`${b.url}/503t`, undefined, 5_000));
    expect([e503.retryable, e503.message]).toEqual([true, `LLM backend ${b.url}/503t answered 503: upstream gone`]);
  });

  it('a context-length 400 is a ContextLengthError; a 200 that is not JSON is retryable', async () => {
    const b = await serve((r) =>
      r.url === '/ctx'
        ? json(400, { error: { message: "This model's maximum context length is 4096 tokens" } })
        : { status: 200, body: '<html>proxy</html>', type: 'text/html' },
    );
    const ctx = await failure(postJson(`${b.url}/ctx`, {}, undefined, 5_000));
    expect(ctx).toBeInstanceOf(ContextLengthError);
    expect(ctx.message).toBe(`${b.url}/ctx: This model's maximum context length is 4096 tokens`);
    const html = await failure(postJson(`${b.url}/html`, {}, undefined, 5_000));
    expect([html.code, html.retryable]).toEqual(['backend_unavailable', true]);
    expect(html.message).toBe(`LLM backend ${b.url}/html answered non-JSON: <html>proxy</html>`);
  });

  it('no answer at all is BackendUnreachableError: refused, reset, or past the deadline (named in seconds)', async () => {
    const dead = await deadPort();
    const refused = await failure(postJson(`${dead}/v1/completions`, {}, undefined, 5_000));
    expect(refused).toBeInstanceOf(BackendUnreachableError);
    expect(isUnreachable(refused)).toBe(true);
    expect(refused.retryable).toBe(true);
    expect(refused.message).toMatch(new RegExp(`^LLM backend ${dead}/v1/completions failed: ECONNREFUSED`));
    const b = await serve((r) => (r.url === '/hang' ? 'hang' : 'hangup'));
    const reset = await failure(postJson(`${b.url}/reset`, {}, undefined, 5_000));
    expect(isUnreachable(reset)).toBe(true);
    expect(reset.message).toMatch(/failed: (ECONNRESET|socket hang up)/);
    const t0 = Date.now();
    const slow = await failure(postJson(`${b.url}/hang`, {}, undefined, 150));
    expect(Date.now() - t0).toBeLessThan(2_000);
    expect(isUnreachable(slow)).toBe(true);
    expect(slow.message).toBe(`LLM backend ${b.url}/hang failed: no answer within 0.15 s`);
  });

  it("the caller's signal ends the wait with the signal's reason (before or during the call)", async () => {
    const b = await serve(() => 'hang');
    const pre = new AbortController();
    pre.abort(new Error('cancelled before'));
    await expect(postJson(`${b.url}/x`, {}, pre.signal, 5_000)).rejects.toThrow('cancelled before');
    expect(b.seen).toHaveLength(0);
    const ac = new AbortController();
    const p = getJson(`${b.url}/x`, ac.signal, 5_000);
    setTimeout(() => ac.abort(new Error('job cancelled')), 30);
    await expect(p).rejects.toThrow('job cancelled');
  });
});

describe('error details', () => {
  it('reads the message from each error shape, cuts long ones, and keeps the cause', async () => {
    const long = 'x'.repeat(700);
    const bodies: Record<string, Answer> = {
      '/nomsg': json(500, { error: { type: 'E' }, message: 'top-level message' }),
      '/nullerr': json(500, { error: null, message: 'beside a null error' }),
      '/other': json(500, { foo: 1 }),
      '/long': json(500, { error: { message: long } }),
      '/ctx500': json(500, { error: { message: 'maximum context length exceeded in the engine' } }),
      '/longhtml': { status: 200, body: `<p>${long}</p>`, type: 'text/html' },
      '/probe500': json(500, {}),
    };
    const b = await serve((r) => bodies[r.url]!);
    expect((await failure(getJson(`${b.url}/nomsg`, undefined, 5_000))).message).toBe(
      `LLM backend ${b.url}/nomsg answered 500: top-level message`,
    );
    expect((await failure(getJson(`${b.url}/nullerr`, undefined, 5_000))).message).toBe(
      `LLM backend ${b.url}/nullerr answered 500: beside a null error`,
    );
    expect((await failure(getJson(`${b.url}/other`, undefined, 5_000))).message).toBe(`LLM backend ${b.url}/other answered 500: {"foo":1}`);
    const cut = await failure(getJson(`${b.url}/long`, undefined, 5_000));
    expect(cut.message).toBe(`LLM backend ${b.url}/long answered 500: ${'x'.repeat(500)}`);
    // only a 400 is a context-length error; a 5xx that mentions the context is the backend failing
    const c500 = await failure(getJson(`${b.url}/ctx500`, undefined, 5_000));
    expect(c500).not.toBeInstanceOf(ContextLengthError);
    expect(c500.retryable).toBe(true);
    const html = await failure(getJson(`${b.url}/longhtml`, undefined, 5_000));
    expect(html.message).toBe(`LLM backend ${b.url}/longhtml answered non-JSON: <p>${'x'.repeat(197)}`);
    expect(html.cause).toBeInstanceOf(SyntaxError);
    const p = await failure(probe(`${b.url}/probe500`, 1_000));
    expect([p.code, p.status, p.retryable]).toEqual(['backend_unavailable', 502, true]);
    const dead = await deadPort();
    const refused = await failure(getJson(`${dead}/x`, undefined, 5_000));
    expect(refused.message).toBe(`LLM backend ${dead}/x failed: ECONNREFUSED connect ECONNREFUSED ${dead.slice(7)}`);
    expect((refused.cause as { code?: string }).code).toBe('ECONNREFUSED');
  });

  it('asks for JSON on every request', async () => {
    const b = await serve(() => json(200, {}));
    await postJson(`${b.url}/p`, {}, undefined, 5_000);
    expect(b.seen[0].headers.accept).toBe('application/json');
  });
});

describe('probe', () => {
  it('resolves below 500 (a 404 still says the process lives); throws on 5xx and on no answer', async () => {
    const b = await serve((r) =>
      r.url === '/ok' ? { status: 200, body: '' } : r.url === '/missing' ? json(404, {}) : json(503, { message: 'loading' }),
    );
    await expect(probe(`${b.url}/ok`, 1_000)).resolves.toBeUndefined();
    await expect(probe(`${b.url}/missing`, 1_000)).resolves.toBeUndefined();
    const e = await failure(probe(`${b.url}/sick`, 1_000));
    expect(e.message).toBe(`LLM backend ${b.url}/sick answered 503: loading`);
    expect(e.retryable).toBe(true);
    expect(isUnreachable(await failure(probe(`${await deadPort()}/health`, 1_000)))).toBe(true);
  });
});

describe('vLLM client', () => {
  const base = { prompt_ids: [1, 2, 3], max_tokens: 8, seed: 5, request_id: 'job-turn-0' };

  it('sends temperature and top_p defaults, omits top_k unless given, names the request, and reads token ids', async () => {
    const b = await serve((r) =>
      r.url === '/v1/models'
        ? json(200, { data: [{ id: 'served-model', max_model_len: 2048 }] })
        : json(200, { choices: [{ token_ids: [7, 8], logprobs: { token_logprobs: [-0.5, null] }, finish_reason: 'length' }] }),
    );
    const c = new VllmClient(`${b.url}/v1`);
    expect(c.address).toBe(b.url);
    const r = await c.generate({ ...base, sampling: {} });
    expect(r).toEqual({ ids: [7, 8], logprobs: [-0.5, 0], finish_reason: 'length' });
    const body = b.seen.find((s) => s.url === '/v1/completions')!.body;
    expect(body).toEqual({
      model: 'served-model',
      prompt: [1, 2, 3],
      max_tokens: 8,
      temperature: 1.0,
      top_p: 1.0,
      n: 1,
      seed: 5,
      logprobs: 0,
      return_tokens_as_token_ids: true,
      return_token_ids: true,
      skip_special_tokens: false,
      include_stop_str_in_output: false,
      stop: [],
      stop_token_ids: [],
      request_id: 'job-turn-0',
    });
    await c.generate({ ...base, stop_token_ids: [9], sampling: { temperature: 0.3, top_p: 0.9, top_k: 20 } });
    const second = b.seen.filter((s) => s.url === '/v1/completions')[1].body;
    expect(second).toMatchObject({ temperature: 0.3, top_p: 0.9, top_k: 20, stop_token_ids: [9] });
    expect(await c.maxModelLen()).toBe(2048);
    expect(b.seen.filter((s) => s.url === '/v1/models')).toHaveLength(1); // fetched once, shared
  });

  it('sends no model when none is configured or served, and the configured one without asking', async () => {
    const b = await serve((r) =>
      r.url === '/v1/models' ? json(200, { data: [] }) : json(200, { choices: [{ token_ids: [1], finish_reason: 'stop' }] }),
    );
    const c = new VllmClient(b.url);
    expect(await c.generate({ ...base, sampling: {} })).toEqual({ ids: [1], logprobs: [0], finish_reason: 'stop' });
    expect('model' in b.seen.find((s) => s.url === '/v1/completions')!.body).toBe(false);
    expect(await c.maxModelLen()).toBeUndefined();
    const named = new VllmClient(b.url, { model: 'mine' });
    const before = b.seen.filter((s) => s.url === '/v1/models').length;
    await named.generate({ ...base, sampling: {} });
    expect(b.seen.at(-1)!.body.model).toBe('mine');
    expect(b.seen.filter((s) => s.url === '/v1/models').length).toBe(before);
  });

  it('maps finish reasons (repetition is a stop, abort kept, error fails retryably) and refuses an answer without choices', async () => {
    const finishes = ['repetition', 'abort', 'error', undefined];
    let i = 0;
    const b = await serve((r) => {
      if (r.url !== '/v1/completions') return json(200, { data: [{ id: 'm' }] });
      const f = finishes[i++];
      return f === undefined
        ? json(200, { choices: [] })
        : json(200, { choices: [{ logprobs: { tokens: ['token_id:4'], token_logprobs: [-1] }, finish_reason: f }] });
    });
    const c = new VllmClient(b.url, { model: 'm' });
    expect(await c.generate({ ...base, sampling: {} })).toEqual({ ids: [4], logprobs: [-1], finish_reason: 'stop' });
    expect((await c.generate({ ...base, sampling: {} })).finish_reason).toBe('abort');
    const err = await failure(c.generate({ ...base, sampling: {} }));
    expect([err.message, err.retryable]).toEqual(['vLLM finished the request with "error"', true]);
    const none = await failure(c.generate({ ...base, sampling: {} }));
    expect([none.message, none.retryable]).toEqual([`vLLM ${b.url} answered without choices`, true]);
  });

  it('uses timeout_ms for the call, else the client requestTimeoutMs', async () => {
    const b = await serve(() => 'hang');
    const c = new VllmClient(b.url, { model: 'm', requestTimeoutMs: 120 });
    expect((await failure(c.generate({ ...base, sampling: {} }))).message).toContain('no answer within 0.12 s');
    expect((await failure(c.generate({ ...base, sampling: {}, timeout_ms: 60 }))).message).toContain('no answer within 0.06 s');
  });

  it('parses "token_id:N" placeholders and refuses anything else', () => {
    expect(parseTokenIdPlaceholder('token_id:151645')).toBe(151645);
    for (const bad of ['151645', 'token_id:', 'xtoken_id:1', 'token_id:1x']) {
      const e = (() => {
        try {
          parseTokenIdPlaceholder(bad);
        } catch (err) {
          return err as RaasError;
        }
      })();
      expect(e?.retryable).toBe(false);
      expect(e?.message).toContain(`vLLM returned token ${JSON.stringify(bad)} instead of "token_id:N"`);
    }
  });

  it('probe hits /health and fetches metadata a failed fetch left unknown', async () => {
    let modelsUp = false;
    const b = await serve((r) =>
      r.url === '/health' ? { status: 200, body: '' } : modelsUp ? json(200, { data: [{ id: 'm', max_model_len: 99 }] }) : json(500, {}),
    );
    const c = new VllmClient(b.url, { metadata: { retryMs: 60_000 } });
    expect(await c.maxModelLen()).toBeUndefined();
    modelsUp = true;
    expect(await c.maxModelLen()).toBeUndefined(); // within the backoff
    await c.probe(1_000);
    expect(b.seen.some((s) => s.url === '/health')).toBe(true);
    await new Promise((r) => setTimeout(r, 50));
    expect(await c.maxModelLen()).toBe(99);
  });
});

describe('malformed backend answers', () => {
  it('vLLM: metadata without data is unknown, an answer without choices is a retryable error, missing logprobs are 0', async () => {
    const models: Record<string, Answer> = { a: { status: 200, body: '' }, b: json(200, { data: null }), c: json(200, { data: [{}] }) };
    for (const k of Object.keys(models)) {
      const b = await serve(() => models[k]);
      expect(await new VllmClient(b.url).maxModelLen()).toBeUndefined();
    }
    const answers: Answer[] = [
      { status: 200, body: '' },
      json(200, { choices: null }),
      json(200, { choices: [{ finish_reason: 'stop', logprobs: null }] }),
      json(200, { choices: [{ token_ids: [3, 4], logprobs: {}, finish_reason: 'stop' }] }),
    ];
    let i = 0;
    const b = await serve(() => answers[i++]);
    const c = new VllmClient(b.url, { model: 'm' });
    const req = { prompt_ids: [1], max_tokens: 2, seed: 1, request_id: 'r', sampling: {} };
    for (let k = 0; k < 2; k++) {
      const e = await failure(c.generate(req));
      expect([e.message, e.retryable]).toEqual([`vLLM ${b.url} answered without choices`, true]);
    }
    expect(await c.generate(req)).toEqual({ ids: [], logprobs: [], finish_reason: 'stop' });
    expect(await c.generate(req)).toEqual({ ids: [3, 4], logprobs: [0, 0], finish_reason: 'stop' });
  });

  it('SGLang: server info without a body is unknown; an answer without meta_info has zero logprobs and stops', async () => {
    const info = await serve(() => ({ status: 200, body: '' }));
    expect(await new SglangClient(info.url).maxModelLen()).toBeUndefined();
    const answers: Answer[] = [json(200, { output_ids: [8, 9] }), { status: 200, body: '' }, json(200, { output_ids: 'nope' })];
    let i = 0;
    const b = await serve(() => answers[i++]);
    const c = new SglangClient(b.url);
    const req = { prompt_ids: [1], max_tokens: 2, seed: 1, request_id: 'r', sampling: {} };
    expect(await c.generate(req)).toEqual({ ids: [8, 9], logprobs: [0, 0], finish_reason: 'stop' });
    for (let k = 0; k < 2; k++) {
      const e = await failure(c.generate(req));
      expect([e.message, e.retryable]).toEqual([`SGLang ${b.url} answered without output_ids`, true]);
    }
  });
});

describe('SGLang client', () => {
  const base = { prompt_ids: [1, 2], max_tokens: 4, seed: 3, request_id: 'rid-1' };

  it('sends the native /generate body with defaults and reads output ids and logprob tuples', async () => {
    const b = await serve(() =>
      json(200, {
        output_ids: [5, 6, 7],
        meta_info: {
          output_token_logprobs: [
            [-0.1, 5, null],
            [null, 6, null],
          ],
          finish_reason: { type: 'length' },
        },
      }),
    );
    const c = new SglangClient(`${b.url}/`);
    expect(await c.generate({ ...base, sampling: {} })).toEqual({ ids: [5, 6, 7], logprobs: [-0.1, 0, 0], finish_reason: 'length' });
    expect(b.seen[0].url).toBe('/generate');
    expect(b.seen[0].body).toEqual({
      input_ids: [1, 2],
      sampling_params: {
        max_new_tokens: 4,
        temperature: 1.0,
        top_p: 1.0,
        top_k: -1,
        stop_token_ids: [],
        skip_special_tokens: false,
        no_stop_trim: true,
        sampling_seed: 3,
      },
      return_logprob: true,
      logprob_start_len: -1,
      top_logprobs_num: 0,
      return_text_in_logprobs: false,
      rid: 'rid-1',
      stream: false,
    });
    await c.generate({ ...base, stop_token_ids: [2], sampling: { temperature: 0.5, top_p: 0.8, top_k: 10 } });
    expect(b.seen[1].body.sampling_params).toMatchObject({ temperature: 0.5, top_p: 0.8, top_k: 10, stop_token_ids: [2] });
  });

  it('maps finish types (abort kept, anything else a stop) and refuses an answer without output_ids', async () => {
    const answers = [{ type: 'abort' }, { type: 'stop', matched: 1 }, null, 'no-ids'];
    let i = 0;
    const b = await serve(() => {
      const f = answers[i++];
      return f === 'no-ids' ? json(200, { text: 'x' }) : json(200, { output_ids: [1], meta_info: { finish_reason: f } });
    });
    const c = new SglangClient(b.url);
    expect((await c.generate({ ...base, sampling: {} })).finish_reason).toBe('abort');
    expect((await c.generate({ ...base, sampling: {} })).finish_reason).toBe('stop');
    expect(await c.generate({ ...base, sampling: {} })).toEqual({ ids: [1], logprobs: [0], finish_reason: 'stop' });
    const e = await failure(c.generate({ ...base, sampling: {} }));
    expect([e.message, e.retryable]).toEqual([`SGLang ${b.url} answered without output_ids`, true]);
  });

  it('reads max_model_len from context_length, else max_req_input_len; probes /health', async () => {
    const a = await serve((r) =>
      r.url === '/health' ? { status: 200, body: '' } : json(200, { context_length: 8192, max_req_input_len: 8000 }),
    );
    const ca = new SglangClient(a.url);
    expect(await ca.maxModelLen()).toBe(8192);
    await ca.probe(1_000);
    expect(a.seen.map((s) => s.url)).toEqual(['/get_server_info', '/health']);
    const b = await serve(() => json(200, { max_req_input_len: 8000 }));
    expect(await new SglangClient(b.url).maxModelLen()).toBe(8000);
    const c = await serve(() => json(200, {}));
    expect(await new SglangClient(c.url).maxModelLen()).toBeUndefined();
    const d = await serve(() => 'hang');
    expect(
      await new SglangClient(d.url, { requestTimeoutMs: 50 }).generate({ ...base, sampling: {} }).catch((e: Error) => e.message),
    ).toContain('no answer within 0.05 s');
  });

  it('a probe that answers fetches server info still unknown', async () => {
    let up = false;
    const b = await serve((r) =>
      r.url === '/health' ? { status: 200, body: '' } : up ? json(200, { context_length: 77 }) : json(500, {}),
    );
    const c = new SglangClient(b.url, { metadata: { retryMs: 60_000 } });
    expect(await c.maxModelLen()).toBeUndefined();
    up = true;
    await c.probe(1_000);
    await new Promise((r) => setTimeout(r, 50));
    expect(await c.maxModelLen()).toBe(77);
  });
});
