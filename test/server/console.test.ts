import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import type { AgentHandler } from '../../src/server/handlers/types.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { openEvents } from '../helpers/sse.js';
import { get, post } from './helpers.js';

const TOKEN = 'console-test-token';
const auth = { authorization: `Bearer ${TOKEN}` };
const root = path.resolve(import.meta.dirname, '../..');
const math = readFileSync(path.join(root, 'configs/data/math.jsonl'), 'utf8')
  .trim()
  .split('\n')
  .map((l) => JSON.parse(l));

/** A handler whose RUN throws: the job fails with critical_error run and the stack as its traceback. */
const explode: AgentHandler<{ data_source?: string }> = {
  name: 'explode',
  instance: z.looseObject({ data_source: z.string().optional() }),
  async init() {
    return {};
  },
  async run() {
    throw new TypeError('the agent tripped over its own tool');
  },
  async eval() {
    return { reward: 1, resolved: true };
  },
};

// A real server on port 0 with the simulated vLLM backend, a token, and the console on.
describe('GET /events and the console routes', () => {
  let sim: SimHandle;
  let srv: RolloutServer;
  const processJob = (instance: Record<string, unknown>, job_id: string) =>
    post(`${srv.url}/process`, { instance, job_id, sampling_params: { temperature: 1, max_tokens_per_turn: 256 } }, auth);

  beforeAll(async () => {
    sim = await startSim({ port: 0, seed: 3, datasets: [path.join(root, 'configs/data/math.jsonl')] });
    srv = await startRolloutServer(
      {
        port: 0,
        log_level: 'silent',
        token: TOKEN,
        llm: { backends: [{ address: sim.url }] },
        console: { event_buffer: 64, backend_metrics_s: 0.2 },
      },
      { handlers: [explode] },
    );
  });
  afterAll(async () => {
    await srv?.close();
    await sim?.close();
  });

  it('streams every state change of a job, in order, numbered, the last one with its outcome', async () => {
    const es = await openEvents(`${srv.url}/events`, auth);
    expect(es.status).toBe(200);
    expect(es.headers['content-type']).toMatch(/^text\/event-stream/);
    const r = await processJob(math[0], 'ev-1');
    expect(r.status).toBe(200);
    const done = await es.until((f) => f.event === 'job' && f.data.job_id === 'ev-1' && f.data.state === 'done');
    const mine = es.frames.filter((f) => f.event === 'job' && f.data.job_id === 'ev-1');
    expect(mine.map((f) => f.data.state)).toEqual(['queued_init', 'init', 'queued_run', 'run', 'queued_eval', 'eval', 'done']);
    expect(mine.map((f) => f.data.from)).toEqual([undefined, 'queued_init', 'init', 'queued_run', 'run', 'queued_eval', 'eval']);
    const ids = mine.map((f) => f.id!);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(done.data).toMatchObject({
      data_source: 'math',
      instance_id: math[0].instance_id,
      reward: r.body.reward,
      critical_error: null,
      finish_reason: r.body.finish_reason,
      num_turns: r.body.num_turns,
    });
    expect(done.data.timing.run_s).toBeCloseTo(r.body.timing.run_s, 6);
    es.close();
  });

  it('resumes after Last-Event-ID with exactly the missed events, and answers reset once the bounded buffer lost some', async () => {
    const first = await openEvents(`${srv.url}/events?types=job`, auth);
    await processJob(math[1], 'ev-2');
    const admitted = await first.until((f) => f.data.job_id === 'ev-2' && f.data.state === 'queued_init');
    const last = await first.until((f) => f.data.job_id === 'ev-2' && f.data.state === 'done');
    first.close();
    const after = first.frames.filter((f) => f.id! > admitted.id! && f.id! <= last.id!);
    const resumed = await openEvents(`${srv.url}/events?types=job`, { ...auth, 'last-event-id': String(admitted.id) });
    await resumed.until((f) => f.id === last.id);
    expect(resumed.frames.filter((f) => f.id! <= last.id!).map((f) => f.id)).toEqual(after.map((f) => f.id));
    resumed.close();
    // 64 events kept: ten more jobs push ev-2's first events out.
    await Promise.all(Array.from({ length: 10 }, (_, k) => processJob(math[(k + 2) % math.length], `ev-fill-${k}`)));
    const late = await openEvents(`${srv.url}/events?last_event_id=${admitted.id}`, auth);
    const reset = await late.until((f) => f.event === 'reset');
    expect(reset.data).toMatchObject({ reason: 'buffer_overrun', last_event_id: srv.feed.log.lastId });
    expect(reset.data.oldest_event_id).toBeGreaterThan(admitted.id! + 1);
    late.close();
    const ahead = await openEvents(`${srv.url}/events?last_event_id=999999999`, auth);
    expect((await ahead.until((f) => f.event === 'reset')).data.reason).toBe('unknown_id');
    ahead.close();
  });

  it('streams backend changes, and only the asked-for types', async () => {
    const es = await openEvents(`${srv.url}/events?types=backend`, auth);
    expect(
      (await post(`${srv.url}/add_llm_server`, { address: 'http://127.0.0.1:9', probe: false, weight_version: '7' }, auth)).status,
    ).toBe(200);
    await post(`${srv.url}/add_llm_server`, { address: 'http://127.0.0.1:9', probe: false, weight_version: '8' }, auth);
    await post(`${srv.url}/remove_llm_server`, { address: 'http://127.0.0.1:9' }, auth);
    await es.until((f) => f.data.change === 'removed');
    expect(es.frames.map((f) => [f.event, f.data.change, f.data.backend.weight_version])).toEqual([
      ['backend', 'added', '7'],
      ['backend', 'weight_version', '8'],
      ['backend', 'removed', '8'],
    ]);
    es.close();
    const bad = await get(`${srv.url}/events?types=jobs`, auth);
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toMatch(/types: "jobs" is not an event type/);
  });

  it('lists jobs by state, data source and critical error, and opens a failed one with its traceback', async () => {
    const failed = await processJob({ data_source: 'explode', instance_id: 'x1' }, 'ev-fail');
    expect(failed.body.critical_error).toBe('run');
    const all = await get(`${srv.url}/ui/api/jobs`, auth);
    expect(all.status).toBe(200);
    expect(all.body.data_sources).toEqual(['explode', 'math']);
    expect(all.body.critical_errors).toEqual(['run']);
    const bad = await get(`${srv.url}/ui/api/jobs?critical_error=any`, auth);
    expect(bad.body.jobs.map((j: { job_id: string }) => j.job_id)).toEqual(['ev-fail']);
    expect(bad.body.jobs[0]).toMatchObject({ state: 'failed', data_source: 'explode', critical_error: 'run', reward: 0 });
    const mathDone = await get(`${srv.url}/ui/api/jobs?state=done&data_source=math&q=ev-1`, auth);
    expect(mathDone.body.jobs.map((j: { job_id: string }) => j.job_id)).toEqual(['ev-1']);
    expect(all.body.by_state.failed).toBe(1);
    const detail = await get(`${srv.url}/ui/api/jobs/ev-fail`, auth);
    expect(detail.body.trajectory).toMatchObject({ critical_error: 'run', reward: 0 });
    expect(detail.body.trajectory.error).toMatch(/TypeError: the agent tripped over its own tool/);
    expect(detail.body.trajectory.traceback).toMatch(/at Object\.run|at run/);
    const ok = await get(`${srv.url}/ui/api/jobs/ev-1`, auth);
    const t = ok.body.trajectory;
    expect(t.turns.map((x: { role: string }) => x.role).slice(0, 2)).toEqual(['system', 'user']);
    expect(t.turns.some((x: { role: string; tokens?: number }) => x.role === 'assistant' && x.tokens! > 0)).toBe(true);
    expect(t.sequences[0].ids.length).toBe(t.sequences[0].prompt_len + t.sequences[0].mask.length);
    expect(t.details).toHaveProperty('ground_truth', math[0].answer);
    expect((await get(`${srv.url}/ui/api/jobs/nope`, auth)).body.error.code).toBe('job_not_found');
    expect((await get(`${srv.url}/ui/api/jobs?limit=0`, auth)).status).toBe(400);
  });

  it("shows each backend's prefix-cache hits from its /metrics while someone looks", async () => {
    let row: { prefix_cache_hit_rate_total: number | null; engine_running: number | null } | undefined;
    for (let i = 0; i < 50 && row?.prefix_cache_hit_rate_total == null; i++) {
      row = (await get(`${srv.url}/ui/api/overview`, auth)).body.backends.find((b: { address: string }) => b.address === sim.url);
      await new Promise((r) => setTimeout(r, 100));
    }
    // The jobs above shared their prompts' prefix: the simulator's vLLM counters say so.
    expect(row!.prefix_cache_hit_rate_total).toBeGreaterThan(0);
    expect(row!.engine_running).toBe(0);
    const ov = (await get(`${srv.url}/ui/api/overview`, auth)).body;
    expect(ov.stages.run.size).toBe(64);
    expect(ov.totals.done).toBeGreaterThanOrEqual(12);
    expect(ov.totals.failed).toBe(1);
    expect(ov.last_event_id).toBe(srv.feed.log.lastId);
  });

  it('needs the token: a browser signs in once and its session cookie stands for the token, same-origin only for changes', async () => {
    expect((await get(`${srv.url}/ui/api/overview`)).status).toBe(401);
    expect((await get(`${srv.url}/events`)).status).toBe(401);
    const page = await fetch(`${srv.url}/ui`, { redirect: 'manual' });
    expect(page.status).toBe(303);
    expect(page.headers.get('location')).toBe('/ui/login');
    const form = await fetch(`${srv.url}/ui/login`);
    expect(await form.text()).toContain('name="token"');
    const wrong = await fetch(`${srv.url}/ui/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'token=nope',
    });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('set-cookie')).toBeNull();
    const right = await fetch(`${srv.url}/ui/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `token=${TOKEN}`,
    });
    expect(right.status).toBe(303);
    const cookie = right.headers.get('set-cookie')!;
    expect(cookie).toMatch(/^raas_session=[\w-]{43}; Path=\/; HttpOnly; SameSite=Strict/);
    const session = { cookie: cookie.split(';')[0]! };
    expect((await get(`${srv.url}/ui/api/overview`, session)).status).toBe(200);
    const es = await openEvents(`${srv.url}/events`, session);
    expect(es.status).toBe(200);
    es.close();
    // A change authenticated by the cookie must come from the console's own origin.
    expect((await post(`${srv.url}/cancel`, { job_id: 'x' }, session)).status).toBe(401);
    expect((await post(`${srv.url}/cancel`, { job_id: 'x' }, { ...session, origin: 'http://evil.example' })).status).toBe(401);
    expect((await post(`${srv.url}/cancel`, { job_id: 'x' }, { ...session, origin: srv.url })).status).toBe(200);
    // A sign-in link: the token leaves the address bar at once.
    const link = await fetch(`${srv.url}/ui?token=${TOKEN}`, { redirect: 'manual' });
    expect(link.status).toBe(303);
    expect(link.headers.get('location')).toBe('/ui');
    expect(link.headers.get('set-cookie')).toMatch(/^raas_session=/);
    expect((await fetch(`${srv.url}/ui?token=wrong`, { redirect: 'manual' })).status).toBe(303);
    // The same link followed from another site's page (the browser says so in Sec-Fetch-Site): the
    // sign-in form, no session; opened from a terminal or the address bar (`none`): signed in.
    for (const site of ['cross-site', 'same-site']) {
      const foreign = await fetch(`${srv.url}/ui?token=${TOKEN}`, { redirect: 'manual', headers: { 'sec-fetch-site': site } });
      expect(foreign.status, site).toBe(403);
      expect(foreign.headers.get('set-cookie'), site).toBeNull();
      expect(await foreign.text()).toContain('Another site sent you here with a sign-in link');
    }
    const typed = await fetch(`${srv.url}/ui?token=${TOKEN}`, { redirect: 'manual', headers: { 'sec-fetch-site': 'none' } });
    expect(typed.headers.get('set-cookie')).toMatch(/^raas_session=/);
    // Signing out ends the session.
    await post(`${srv.url}/ui/logout`, undefined, { ...session, origin: srv.url });
    expect((await get(`${srv.url}/ui/api/overview`, session)).status).toBe(401);
  });

  it('closes with event streams open: close() ends them instead of waiting for them', async () => {
    const other = await startRolloutServer({ port: 0, log_level: 'silent' });
    const es = await openEvents(`${other.url}/events?stats=1`);
    await es.until((f) => f.event === 'stats');
    const ended = new Promise<void>((resolve) => es.onEnd(resolve));
    const t0 = Date.now();
    await other.close();
    await ended;
    expect(Date.now() - t0).toBeLessThan(5_000);
  });

  it('serves the pages and their libraries from the package, nothing else', async () => {
    const page = await get(`${srv.url}/ui`, auth);
    expect(page.status).toBe(200);
    expect(page.text).toContain('<script type="importmap">');
    expect(page.text).not.toMatch(/https?:\/\//);
    for (const lib of [
      'preact.mjs',
      'preact-hooks.mjs',
      'htm.mjs',
      'uplot.mjs',
      'uplot.css',
      'virtual-core/index.js',
      'virtual-core/utils.js',
    ]) {
      const r = await fetch(`${srv.url}/ui/vendor/${lib}`, { headers: auth });
      expect(r.status, lib).toBe(200);
      expect(await r.text(), lib).not.toContain('process.env');
    }
    expect((await get(`${srv.url}/ui/vendor/../../package.json`, auth)).status).toBe(404);
    expect((await get(`${srv.url}/ui/vendor/zod.mjs`, auth)).body.error.code).toBe('route_not_found');
    expect((await get(`${srv.url}/ui/static/app.js`, auth)).status).toBe(200);
    expect((await get(`${srv.url}/ui/static/tsconfig.json`, auth)).status).toBe(404);
  });
});
