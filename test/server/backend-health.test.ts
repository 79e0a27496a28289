// The LLM backend pool's health: a circuit breaker per backend on consecutive
// connection failures or timeouts, no new work while it is open, a probe that brings it back, a
// per-call deadline from max_tokens, calls in flight ending (and their jobs moving) when it opens,
// clear + re-add keeping the load and weight_version of jobs in flight, and metadata fetched again
// after a failure instead of being cached as final. Backends are real HTTP servers on port 0.
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { LlmPoolConfig } from '../../src/protocol/config-server.js';
import { BackendPool, JobLlmSession, VllmClient } from '../../src/server/index.js';
import { defaultClientFactory, type Backend } from '../../src/server/llm/pool.js';
import { systemClock } from '../../src/util/clock.js';
import { ManualClock } from './helpers.js';

type Mode = 'live' | 'hang' | 'models_500';

/** A vLLM stand-in whose behaviour the test switches: live, hanging (accepts, never answers), or down (not listening). */
class ScriptedBackend {
  mode: Mode = 'live';
  readonly hits = { health: 0, models: 0, completions: 0 };
  /** Delay of /v1/models answers. */
  modelsDelayMs = 0;
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  port = 0;

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async up(): Promise<this> {
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        if (req.url === '/health') this.hits.health++;
        else if (req.url === '/v1/models') this.hits.models++;
        else this.hits.completions++;
        if (this.mode === 'hang') return;
        if (req.url === '/health') return reply(res, 200, {});
        if (req.url === '/v1/models') {
          if (this.mode === 'models_500') return reply(res, 500, { error: { message: 'not ready' } });
          setTimeout(() => reply(res, 200, { data: [{ id: 'm', max_model_len: 4096 }] }), this.modelsDelayMs);
          return;
        }
        reply(res, 200, {
          choices: [{ token_ids: [11, 12, 13], logprobs: { token_logprobs: [-0.1, -0.2, -0.3] }, finish_reason: 'stop' }],
        });
      });
    });
    server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((r) => server.listen(this.port, '127.0.0.1', r));
    this.port = (server.address() as { port: number }).port;
    this.server = server;
    return this;
  }

  /** Stops listening: connections are refused until `up()` again (same port). */
  async down(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    for (const sock of this.sockets) sock.destroy();
    if (s) await new Promise((r) => s.close(r));
  }
}

function reply(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

async function until(fn: () => boolean, what: string, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!fn()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

const PROMPT = [1, 2, 3, 4];

describe('backend pool health', () => {
  const backends: ScriptedBackend[] = [];
  const pools: BackendPool[] = [];
  const start = async (mode: Mode = 'live') => {
    const b = new ScriptedBackend();
    b.mode = mode;
    backends.push(b);
    return b.up();
  };
  const poolOf = (cfg: Record<string, unknown>, clock = new ManualClock()) => {
    const pool = new BackendPool(
      LlmPoolConfig.parse({ backoff_base_ms: 1, backoff_max_ms: 2, ...cfg }),
      defaultClientFactory({ model: 'm' }),
      Math.random,
      { clock },
    );
    pools.push(pool);
    return { pool, clock };
  };
  const session = (pool: BackendPool, jobId: string, clock = systemClock) =>
    new JobLlmSession({ pool, jobId, groupId: undefined, sampling: { max_model_len: 4096 }, clock });
  afterEach(async () => {
    for (const p of pools.splice(0)) p.close();
    await Promise.all(backends.splice(0).map((b) => b.down()));
  });

  it('consecutive connection failures open the breaker: no new jobs while open (an idle dead backend is not "least loaded"), the probe brings it back', async () => {
    const a = await start();
    const aUrl = a.url;
    await a.down();
    const b = await start();
    const { pool, clock } = poolOf({ retries: 5, unhealthy_after: 3, probe_interval_s: 1, probe_timeout_s: 1 });
    pool.add(aUrl);
    const s = session(pool, 'j0');
    s.bind();
    expect(s.backend).toBe(aUrl);
    pool.add(b.url);
    // Three refused calls open A's breaker; the job moves at once instead of spending its 5 retries.
    const r = await s.generate({ prompt_ids: PROMPT, max_tokens: 8 });
    expect(r.backend).toBe(b.url);
    expect(pool.moves).toBe(1);
    const infoA = () => pool.list().find((x) => x.address === aUrl)!;
    expect(infoA()).toMatchObject({ healthy: false, active: 0 });
    expect(pool.get(aUrl)!.lastError).toMatch(/ECONNREFUSED/);
    s.release();
    // A has no load and B twenty jobs: still every job goes to B while A is unhealthy.
    const held = Array.from({ length: 20 }, () => pool.acquire()!);
    expect(new Set(held.map((x) => x.address))).toEqual(new Set([b.url]));
    // A listens again on its port: the next probe closes the breaker and A takes the next job.
    await a.up();
    await clock.advance(1_000);
    await until(() => infoA().healthy, 'A healthy again');
    expect(pool.acquire()!.address).toBe(aUrl);
    expect(a.hits.completions).toBe(0);
  });

  it('a hung backend: failed probes open the breaker, the call in flight ends at once and the job moves', async () => {
    const hung = await start('hang');
    const live = await start();
    // Deadlines far away: only the breaker can end the call.
    const { pool, clock } = poolOf({ unhealthy_after: 2, probe_interval_s: 1, probe_timeout_s: 0.05 });
    pool.add(hung.url);
    const s = session(pool, 'j1');
    s.bind();
    pool.add(live.url);
    const pending = s.generate({ prompt_ids: PROMPT, max_tokens: 8 });
    await until(() => hung.hits.completions === 1, 'the call reached the hung backend');
    const hb = pool.get(hung.url)!;
    await clock.advance(1);
    await until(() => hb.failures === 1, 'first probe timed out');
    expect(hb.healthy).toBe(true);
    await clock.advance(1_000);
    const r = await pending;
    expect(hb.healthy).toBe(false);
    expect(r.backend).toBe(live.url);
    expect(pool.moves).toBe(1);
    expect(s.turns).toEqual([{ backend: live.url, weight_version: 'default' }]);
    expect(hb.lastError).toMatch(/health failed: no answer within 0\.05 s/);
    s.release();
    expect(hb.active).toBe(0);
  });

  it("a call's deadline follows its max_tokens (deadline_base_s + max_tokens × deadline_per_token_ms), capped by request_timeout_s", async () => {
    const hung = await start('hang');
    const { pool } = poolOf({ deadline_base_s: 0.1, deadline_per_token_ms: 1, retries: 0, max_moves: 0 });
    expect(pool.deadlineMs(100)).toBe(200);
    expect(poolOf({ request_timeout_s: 1 }).pool.deadlineMs(1024)).toBe(1_000);
    expect(poolOf({}).pool.deadlineMs(1024)).toBe(60_000 + 102_400);
    pool.add(hung.url);
    const s = session(pool, 'j2');
    s.bind();
    const err = await s.generate({ prompt_ids: PROMPT, max_tokens: 100 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'backend_unavailable' });
    expect((err as Error).message).toMatch(/no answer within 0\.2 s/);
    // A timeout counts toward the breaker like a refused connection.
    expect(pool.get(hung.url)!.failures).toBe(1);
  });

  it('with every backend unhealthy a job fails at once, names the last failure, and sends nothing', async () => {
    const a = await start();
    const url = a.url;
    await a.down();
    const { pool } = poolOf({ retries: 2, unhealthy_after: 3 });
    pool.add(url);
    const first = session(pool, 'j3');
    first.bind();
    await expect(first.generate({ prompt_ids: PROMPT, max_tokens: 8 })).rejects.toMatchObject({ code: 'backend_unavailable' });
    expect(pool.get(url)!.healthy).toBe(false);
    const s = session(pool, 'j4');
    s.bind();
    expect(s.backend).toBeNull();
    const err = (await s.generate({ prompt_ids: PROMPT, max_tokens: 8 }).catch((e: unknown) => e)) as Error;
    expect(err.message).toMatch(/every LLM backend stopped answering \(0 tried, 1 marked unhealthy; last: .*ECONNREFUSED/);
  });

  it('round_robin skips a backend whose breaker is open', async () => {
    const a = await start();
    const aUrl = a.url;
    await a.down();
    const b = await start();
    const { pool } = poolOf({ routing: 'round_robin', retries: 0, unhealthy_after: 1, max_moves: 5 });
    pool.add(aUrl);
    pool.add(b.url);
    for (let i = 0; i < 6; i++) expect((await session(pool, `rr${i}`).generate({ prompt_ids: PROMPT, max_tokens: 8 })).backend).toBe(b.url);
    expect(pool.moves).toBeLessThanOrEqual(1);
    expect(pool.list().find((x) => x.address === aUrl)!.healthy).toBe(false);
  });

  it('clear + re-add during RUN keeps the load of jobs in flight and gives their next turns the new weight_version', async () => {
    const a = await start();
    const { pool } = poolOf({});
    pool.add(a.url, 'vllm', 'v1');
    const jobs = [0, 1, 2].map((i) => session(pool, `c${i}`));
    for (const j of jobs) j.bind();
    for (const j of jobs) await j.generate({ prompt_ids: PROMPT, max_tokens: 8 });
    // ProRL's weight update: clear, then add every backend again with the new version.
    pool.clear();
    expect(pool.list()).toEqual([]);
    pool.add(a.url, 'vllm', 'v2');
    expect(pool.list()).toMatchObject([{ address: a.url, weight_version: 'v2', active: 3 }]);
    for (const j of jobs) await j.generate({ prompt_ids: PROMPT, max_tokens: 8 });
    for (const j of jobs) expect(j.turns.map((t) => t.weight_version)).toEqual(['v1', 'v2']);
    for (const j of jobs) j.release();
    expect(pool.list()[0]!.active).toBe(0);
  });

  it('a removed backend is forgotten once its last job ends: a later add starts from zero load', async () => {
    const a = await start();
    const { pool } = poolOf({});
    pool.add(a.url, 'vllm', 'v1');
    const s = session(pool, 'r0');
    s.bind();
    const before = pool.get(a.url) as Backend;
    pool.remove(a.url);
    // Still held: a re-add now revives the same Backend with its load.
    expect(pool.add(a.url, 'vllm', 'v2')).toBe(before);
    expect(before.active).toBe(1);
    pool.remove(a.url);
    s.release();
    const fresh = pool.add(a.url);
    expect(fresh).not.toBe(before);
    expect(fresh.info()).toMatchObject({ active: 0, weight_version: 'default', healthy: true });
  });

  it('while generation is paused (co-located engines asleep) failures do not count; resume starts the breakers afresh', async () => {
    const a = await start();
    const aUrl = a.url;
    const { pool, clock } = poolOf({ unhealthy_after: 2, probe_interval_s: 1, probe_timeout_s: 1 });
    pool.add(aUrl);
    await clock.advance(0);
    pool.suspendHealth();
    // The engine sleeps through the training step: every probe fails, the backend stays routable.
    await a.down();
    for (let i = 0; i < 5; i++) await clock.advance(1_000);
    await new Promise((r) => setTimeout(r, 50));
    expect(pool.list().find((x) => x.address === aUrl)).toMatchObject({ healthy: true });
    expect(pool.get(aUrl)!.failures).toBe(0);
    // Resumed with the engine still down: probes count again and open the breaker.
    pool.resumeHealth();
    for (let i = 0; i < 4 && pool.get(aUrl)!.healthy; i++) {
      await clock.advance(1_000);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(pool.get(aUrl)!.healthy).toBe(false);
  });
});

describe('backend metadata (/v1/models)', () => {
  const backends: ScriptedBackend[] = [];
  afterEach(async () => {
    await Promise.all(backends.splice(0).map((b) => b.down()));
  });
  const start = async (mode: Mode) => {
    const b = new ScriptedBackend();
    b.mode = mode;
    backends.push(b);
    return b.up();
  };

  it('a failed fetch is not cached as final: unknown during its backoff, fetched again after it, then kept', async () => {
    const b = await start('models_500');
    let now = 0;
    const c = new VllmClient(b.url, { metadata: { retryMs: 1_000, clock: { now: () => now } } });
    expect(await c.maxModelLen()).toBeUndefined();
    expect(await c.maxModelLen()).toBeUndefined();
    expect(b.hits.models).toBe(1); // within the backoff: no new request
    b.mode = 'live';
    now = 1_000;
    expect(await c.maxModelLen()).toBe(4096);
    now = 1_000_000;
    expect(await c.maxModelLen()).toBe(4096);
    expect(b.hits.models).toBe(2);
  });

  it("one job's cancel ends only its own wait: the shared fetch goes on for the others", async () => {
    const b = await start('live');
    b.modelsDelayMs = 100;
    const c = new VllmClient(b.url);
    const job = new AbortController();
    const first = c.maxModelLen(job.signal);
    const other = c.maxModelLen();
    job.abort(new Error('job cancelled'));
    await expect(first).rejects.toThrow('job cancelled');
    expect(await other).toBe(4096);
    expect(await c.maxModelLen()).toBe(4096);
    expect(b.hits.models).toBe(1);
  });

  it('a probe that finds the backend answering again fetches metadata still unknown', async () => {
    const b = await start('models_500');
    const c = new VllmClient(b.url, { metadata: { retryMs: 3_600_000 } });
    expect(await c.maxModelLen()).toBeUndefined();
    b.mode = 'live';
    await c.probe(1_000);
    await until(() => b.hits.models === 2, 'metadata fetched after the probe');
    expect(await c.maxModelLen()).toBe(4096);
  });
});
