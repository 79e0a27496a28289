// A job's LLM session and the server's generation gate, against real local HTTP backends (the
// simulator for the happy path, scripted servers for failures): seeds, context clamping, retries
// with backoff, moves between backends and their limit, the errors of a job left without a
// backend, round robin, and pause/resume in drain and abort mode.
import { createServer, type Server, type ServerResponse } from 'node:http';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ContextLengthError, type RaasError } from '../../src/protocol/errors.js';
import { LlmPoolConfig } from '../../src/protocol/config-server.js';
import { BackendPool, defaultClientFactory, gateOf } from '../../src/server/llm/pool.js';
import { JobLlmSession } from '../../src/server/llm/session.js';
import { GenerationGate, PausedAbort } from '../../src/server/llm/gate.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { systemClock } from '../../src/util/clock.js';
import { seedOf } from '../../src/util/hash.js';

interface Seen {
  url: string;
  body: any;
}
type Reply = { status: number; body: unknown } | 'hang';

const servers: Server[] = [];
const sims: SimHandle[] = [];
const pools: BackendPool[] = [];
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
  await Promise.all(sims.map((s) => s.close()));
});
afterEach(() => {
  for (const p of pools.splice(0)) p.close();
});

/** A vLLM stand-in answering /v1/completions as `reply` says (seen in order); /v1/models names max_model_len 64. */
async function backend(reply: (req: Seen, n: number) => Reply = () => ok([1, 2])): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = createServer((req, res: ServerResponse) => {
    let data = '';
    req.on('data', (c) => (data += c));
    req.on('end', () => {
      const rec = { url: req.url ?? '', body: data ? JSON.parse(data) : undefined };
      if (rec.url === '/v1/models') return send(res, 200, { data: [{ id: 'm', max_model_len: 64 }] });
      if (rec.url === '/health') return send(res, 200, {});
      seen.push(rec);
      const a = reply(rec, seen.filter((s) => s.url === rec.url).length);
      if (a !== 'hang') send(res, a.status, a.body);
    });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, seen };
}
function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}
const ok = (ids: number[], finish = 'stop'): Reply => ({
  status: 200,
  body: { choices: [{ token_ids: ids, logprobs: { token_logprobs: ids.map(() => -0.25) }, finish_reason: finish }] },
});
const fail500: Reply = { status: 500, body: { error: { message: 'engine error' } } };

function pool(over: Record<string, unknown> = {}): BackendPool {
  const p = new BackendPool(
    LlmPoolConfig.parse({ backoff_base_ms: 1, backoff_max_ms: 4, probe_interval_s: 3600, ...over }),
    defaultClientFactory({ model: 'm' }),
    () => 0.5,
  );
  pools.push(p);
  return p;
}
function session(p: BackendPool, over: Partial<ConstructorParameters<typeof JobLlmSession>[0]> = {}) {
  return new JobLlmSession({ pool: p, jobId: 'job-1', groupId: undefined, sampling: {}, clock: systemClock, ...over });
}

describe('JobLlmSession', () => {
  it('generates through the simulator: ids, logprobs, the backend and its weight_version per turn', async () => {
    const sim = await startSim({ seed: 3, weight_version: 'w7' });
    sims.push(sim);
    const p = pool();
    p.add(sim.url, 'vllm', 'w7');
    const calls: string[] = [];
    const s = session(p, { seed: 11, observer: { llmCall: (api) => calls.push(api) } });
    expect(s.backend).toBeNull();
    s.bind();
    expect(s.backend).toBe(sim.url);
    expect(p.get(sim.url)!.active).toBe(1);
    const r = await s.generate({ prompt_ids: [151644, 872, 198, 9707, 151645, 198, 151644, 77091, 198], max_tokens: 6 });
    expect(r.ids.length).toBeGreaterThan(0);
    expect(r.ids.length).toBeLessThanOrEqual(6);
    expect(r.logprobs).toHaveLength(r.ids.length);
    expect(r).toMatchObject({ backend: sim.url, weight_version: 'w7' });
    expect(s.turns).toEqual([{ backend: sim.url, weight_version: 'w7' }]);
    expect(calls).toEqual(['vllm']);
    s.release();
    s.release();
    expect(p.get(sim.url)!.active).toBe(0);
    expect(s.backend).toBe(sim.url); // the last backend is still named
    s.bind(); // a released session never binds again
    expect(p.get(sim.url)!.active).toBe(0);
  });

  it('seeds each turn with hash(job seed, turn), or hash(sampling seed or 0, job id, turn) without one; names each call', async () => {
    const b = await backend();
    const p = pool({ deadline_base_s: 2, deadline_per_token_ms: 1 });
    p.add(b.url);
    const withSeed = session(p, { seed: 99 });
    withSeed.bind();
    await withSeed.generate({ prompt_ids: [1], max_tokens: 3 });
    await withSeed.generate({ prompt_ids: [1], max_tokens: 3 });
    const noSeed = session(p, { jobId: 'job-2', sampling: { seed: 4 } });
    await noSeed.generate({ prompt_ids: [1], max_tokens: 3 });
    const bare = session(p, { jobId: 'job-3' });
    await bare.generate({ prompt_ids: [1], max_tokens: 3 });
    expect(b.seen.map((s) => s.body.seed)).toEqual([seedOf(99, 0), seedOf(99, 1), seedOf(4, 'job-2', 0), seedOf(0, 'job-3', 0)]);
    expect(b.seen.map((s) => s.body.request_id)).toEqual(['job-1-turn-0', 'job-1-turn-1', 'job-2-turn-0', 'job-3-turn-0']);
  });

  it('clamps max_tokens to what max_model_len leaves, and refuses a prompt that fills it', async () => {
    const b = await backend();
    const p = pool();
    p.add(b.url);
    const s = session(p);
    s.bind();
    expect(await s.maxModelLen()).toBe(64);
    await s.generate({ prompt_ids: new Array(60).fill(1), max_tokens: 10 });
    expect(b.seen[0].body.max_tokens).toBe(4);
    await s.generate({ prompt_ids: new Array(10).fill(1), max_tokens: 10 });
    expect(b.seen[1].body.max_tokens).toBe(10);
    const full = await s.generate({ prompt_ids: new Array(64).fill(1), max_tokens: 10 }).catch((e: unknown) => e);
    expect(full).toBeInstanceOf(ContextLengthError);
    expect((full as Error).message).toBe('the prompt has 64 tokens and max_model_len is 64: no room to generate');
    // sampling_params.max_model_len wins over the backend's
    const own = session(p, { sampling: { max_model_len: 20 } });
    expect(await own.maxModelLen()).toBe(20);
    await own.generate({ prompt_ids: new Array(15).fill(1), max_tokens: 10 });
    expect(b.seen.at(-1)!.body.max_tokens).toBe(5);
    // no backend at all: unknown
    expect(await session(pool()).maxModelLen()).toBeUndefined();
  });

  it('retries a 5xx `retries` times on its backend, then moves the job (same prompt) to another', async () => {
    const bad = await backend(() => fail500);
    const good = await backend(() => ok([5]));
    const p = pool({ retries: 2, group_affinity: false });
    const moves: number[] = [];
    const a = p.add(bad.url);
    const s = session(p, { observer: { move: () => moves.push(1) } });
    s.bind();
    p.add(good.url);
    const r = await s.generate({ prompt_ids: [9, 8, 7], max_tokens: 3 });
    expect(bad.seen).toHaveLength(3); // first try + 2 retries
    expect(good.seen.map((x) => x.body.prompt)).toEqual([[9, 8, 7]]);
    expect(r.backend).toBe(good.url);
    expect(s.backend).toBe(good.url);
    expect(moves).toHaveLength(1);
    expect(p.moves).toBe(1);
    expect(a.active).toBe(0); // released when the job moved
    expect(a.healthy).toBe(true); // answers, even 500s, are not unreachability
  });

  it('a non-retryable answer fails the call at once', async () => {
    const b = await backend(() => ({ status: 400, body: { error: { message: 'bad prompt' } } }));
    const p = pool({ retries: 3 });
    p.add(b.url);
    const s = session(p);
    const e = await s.generate({ prompt_ids: [1], max_tokens: 2 }).catch((x: RaasError) => x);
    expect(e.retryable).toBe(false);
    expect(e.message).toContain('answered 400: bad prompt');
    expect(b.seen).toHaveLength(1);
  });

  it('past max_moves the job fails with the last failure; with every backend tried it names them', async () => {
    const x = await backend(() => fail500);
    const y = await backend(() => fail500);
    const p0 = pool({ retries: 0, max_moves: 0, group_affinity: false });
    p0.add(x.url);
    p0.add(y.url);
    const e0 = await session(p0)
      .generate({ prompt_ids: [1], max_tokens: 2 })
      .catch((e: RaasError) => e);
    expect(e0.message).toContain('answered 500: engine error');
    expect(x.seen.length + y.seen.length).toBe(1);
    const p1 = pool({ retries: 0, max_moves: 5, group_affinity: false });
    p1.add(x.url);
    p1.add(y.url);
    const e1 = await session(p1)
      .generate({ prompt_ids: [1], max_tokens: 2 })
      .catch((e: RaasError) => e);
    expect(e1.code).toBe('backend_unavailable');
    expect(e1.message).toMatch(
      /^every LLM backend stopped answering \(2 tried; last: LLM backend http:\/\/127\.0\.0\.1:\d+\/v1\/completions answered 500: engine error\)$/,
    );
  });

  it('an empty pool says how to register a backend', async () => {
    const e = await session(pool())
      .generate({ prompt_ids: [1], max_tokens: 2 })
      .catch((x: RaasError) => x);
    expect([e.code, e.message]).toEqual(['backend_unavailable', 'no LLM backend is registered: POST /add_llm_server']);
  });

  it('a job whose backend was marked unhealthy between turns moves before its next call; the move is counted', async () => {
    const a = await backend(() => ok([1]));
    const b = await backend(() => ok([2]));
    const p = pool({ group_affinity: false, unhealthy_after: 1 });
    const ba = p.add(a.url);
    const s = session(p);
    s.bind();
    await s.generate({ prompt_ids: [1], max_tokens: 2 });
    p.add(b.url);
    await new Promise((r) => setTimeout(r, 50)); // the first probes (at registration) have answered
    p.failed(ba, new Error('refused'));
    const r = await s.generate({ prompt_ids: [1], max_tokens: 2 });
    expect(r.backend).toBe(b.url);
    expect(p.moves).toBe(1);
    expect(s.turns.map((t) => t.backend)).toEqual([a.url, b.url]);
    // with no healthy backend left the error names the unhealthy one and its last failure
    p.failed(p.get(b.url)!, new Error('gone too'));
    const e = await s.generate({ prompt_ids: [1], max_tokens: 2 }).catch((x: RaasError) => x);
    expect(e.message).toMatch(
      /^every LLM backend stopped answering \(0 tried, 2 marked unhealthy; last: LLM backend .* is marked unhealthy \(last: gone too\)\)$/,
    );
  });

  it('round_robin sends each request to the next backend and holds none between requests', async () => {
    const a = await backend(() => ok([1]));
    const b = await backend(() => ok([2]));
    const p = pool({ routing: 'round_robin' });
    p.add(a.url);
    p.add(b.url);
    const s = session(p);
    s.bind();
    expect(s.backend).toBeNull();
    const got = [];
    for (let i = 0; i < 3; i++) got.push((await s.generate({ prompt_ids: [1], max_tokens: 2 })).backend);
    expect(got).toEqual([a.url, b.url, a.url]);
    expect(p.list().map((i) => i.active)).toEqual([0, 0]);
    expect(s.backend).toBe(a.url);
  });

  it("the job's cancel ends a call at once and is not retried", async () => {
    const b = await backend(() => 'hang');
    const p = pool({ retries: 5 });
    p.add(b.url);
    const ac = new AbortController();
    const pr = session(p).generate({ prompt_ids: [1], max_tokens: 2, signal: ac.signal });
    const caught = pr.catch((e: Error) => e);
    while (b.seen.length === 0) await new Promise((r) => setTimeout(r, 5)); // the call reached the backend
    ac.abort(new Error('job cancelled'));
    expect(((await caught) as Error).message).toBe('job cancelled');
    await new Promise((r) => setTimeout(r, 50));
    expect(b.seen).toHaveLength(1);
  });
});

describe('GenerationGate', () => {
  it('reports its state; a pause with nothing in flight answers at once; resume releases the held jobs', async () => {
    const events: string[] = [];
    const g = new GenerationGate(systemClock, { paused: () => events.push('paused'), resumed: () => events.push('resumed') });
    expect(g.status()).toEqual({ paused: false, in_flight: 0, held: 0 });
    expect(g.resume()).toEqual({ status: 'running', released: 0 });
    expect(events).toEqual([]); // resuming a running gate tells nobody
    expect(await g.pause('drain', 1_000)).toEqual({ status: 'paused', mode: 'drain', in_flight: 0, aborted: 0, disconnected: 0, held: 0 });
    expect(g.paused).toBe(true);
    const holds: boolean[] = [];
    let passed = false;
    const held = g.hold(undefined, (h) => holds.push(h)).then(() => (passed = true));
    await new Promise((r) => setTimeout(r, 10));
    expect(passed).toBe(false);
    expect(g.status()).toEqual({ paused: true, mode: 'drain', in_flight: 0, held: 1 });
    expect(g.resume()).toEqual({ status: 'running', released: 1 });
    await held;
    expect(holds).toEqual([true, false]);
    expect(events).toEqual(['paused', 'resumed']);
    // not paused: no wait and no hold callbacks
    await g.hold(undefined, (h) => holds.push(h));
    expect(holds).toEqual([true, false]);
  });

  it("a held job's cancel ends its wait with the cancel's reason", async () => {
    const g = new GenerationGate();
    await g.pause('drain', 1_000);
    const ac = new AbortController();
    const w = g.hold(ac.signal);
    ac.abort(new Error('cancelled while held'));
    await expect(w).rejects.toThrow('cancelled while held');
    expect(g.status().held).toBe(0);
    await expect(g.hold(ac.signal)).rejects.toThrow('cancelled while held');
    g.resume();
  });

  it('drain waits for the calls in flight; abort asks vLLM and SGLang to cut them and counts the outcomes', async () => {
    const v = await backend();
    const sg = await backend();
    const p = pool();
    const bv = p.add(v.url);
    const bs = p.add(sg.url, 'sglang');
    const g = gateOf(p);
    expect(gateOf(p)).toBe(g);
    const c1 = await g.enter(bv, 'r1');
    const drained = g.pause('drain', 1_000);
    let done = false;
    void drained.then(() => (done = true));
    await new Promise((r) => setTimeout(r, 20));
    expect(done).toBe(false);
    g.exit(c1);
    g.exit(c1); // safe twice
    expect(await drained).toMatchObject({ mode: 'drain', in_flight: 1, aborted: 0, disconnected: 0 });
    g.resume();
    const cv = await g.enter(bv, 'job-9-turn-2');
    const cs = await g.enter(bs, 'job-8-turn-0');
    const paused = g.pause('abort', 5_000);
    await new Promise((r) => setTimeout(r, 50));
    expect(v.seen.find((s) => s.url === '/abort_requests')?.body).toEqual({ request_ids: ['job-9-turn-2', 'cmpl-job-9-turn-2-0'] });
    expect(sg.seen.find((s) => s.url === '/abort_request')?.body).toEqual({ rid: 'job-8-turn-0', abort_all: false });
    g.exit(cv, true); // the backend cut it: finish_reason abort
    g.exit(cs);
    expect(await paused).toEqual({ status: 'paused', mode: 'abort', in_flight: 2, aborted: 1, disconnected: 0, held: 0 });
    g.resume();
  });

  it('abort drops at once the calls of a backend without an abort route, and the rest after the grace', async () => {
    const noRoute = await backend((r) => (r.url.startsWith('/abort') ? { status: 404, body: { detail: 'Not Found' } } : ok([1])));
    const slow = await backend();
    const p = pool();
    const g = gateOf(p);
    const a = await g.enter(p.add(noRoute.url), 'a');
    const b = await g.enter(p.add(slow.url), 'b');
    // as a session does: a dropped call ends (and leaves the gate) when its signal aborts
    const outcome: string[] = [];
    for (const [c, n] of [
      [a, 'a'],
      [b, 'b'],
    ] as const)
      c.signal.addEventListener('abort', () => {
        outcome.push(`${n} ${Date.now() - t0 < 1000 ? 'at once' : 'after grace'}`);
        g.exit(c);
      });
    const t0 = Date.now();
    const r = await g.pause('abort', 1500);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1490);
    expect(a.signal.aborted).toBe(true);
    expect(a.signal.reason).toBeInstanceOf(PausedAbort);
    expect(b.signal.aborted).toBe(true);
    expect(outcome).toEqual(['a at once', 'b after grace']);
    expect(r).toEqual({ status: 'paused', mode: 'abort', in_flight: 2, aborted: 0, disconnected: 2, held: 0 });
    g.resume();
  });
});
