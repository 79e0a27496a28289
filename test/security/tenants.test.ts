// Red team, tenants: tenant "b" attacks tenant "a" on one real rollout server (port 0, real HTTP),
// each tenant with its own simulated vLLM backend, whose request log says whose prompts it served.
// b knows a's job ids and backend address (a shared cluster makes both guessable) and holds only
// its own token; what it may learn of a is a's existence in the fleet totals, nothing more.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { systemClock } from '../../src/util/clock.js';
import { openEvents } from '../helpers/sse.js';
import { get, post, stagedHandler } from '../server/helpers.js';
import { hex } from './helpers.js';

const ADMIN = `admin-${hex(8)}`;
const A = `tenant-a-${hex(8)}`;
const B = `tenant-b-${hex(8)}`;
const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const waitFor = async (what: string, ok: () => Promise<boolean> | boolean, ms = 15_000): Promise<void> => {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
};

let simA: SimHandle;
let simB: SimHandle;
let spare: SimHandle;
let srv: RolloutServer;
let dir: string;
const as = (t: string) => ({
  post: (route: string, body?: unknown) => post(`${srv.url}${route}`, body, bearer(t)),
  get: (route: string) => get(`${srv.url}${route}`, bearer(t)),
});
/** A's model name: it must never reach b. */
const MODEL_A = `team-a/Secret-${hex(4)}`;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'raas-rt-tenants-'));
  const filler = { median_tokens: 8, sigma: 0.1, max_tokens: 16 };
  simA = await startSim({ model: MODEL_A, request_log: 500, filler });
  simB = await startSim({ model: 'team-b/Model', request_log: 500, filler });
  spare = await startSim({ model: 'team-a/Next', request_log: 500, filler });
  srv = await startRolloutServer(
    {
      port: 0,
      log_level: 'silent',
      token: ADMIN,
      journal: { dir: path.join(dir, 'journal') },
      workers: { init: 1, run: 2, eval: 2 },
      max_queued_jobs: 4,
      tenants: [
        // a's operator lists the addresses a may register: nobody else can take them first.
        { name: 'a', token: A, backends: [{ address: simA.url }], allowed_backends: [simA.url, spare.url] },
        { name: 'b', token: B, backends: [{ address: simB.url }] },
      ],
    },
    { handlers: [stagedHandler(systemClock)], baseDir: dir },
  );
}, 60_000);
afterAll(async () => {
  await srv?.close();
  await Promise.all([simA?.close(), simB?.close(), spare?.close()]);
  await rm(dir, { recursive: true, force: true });
});

const chatJob = (id: string, extra: Record<string, unknown> = {}) => ({
  instance: { data_source: 'chat', turns: 2, pass_rate: 1, ...extra },
  job_id: id,
  sampling_params: { max_model_len: 2048 },
});
const staged = (id: string, extra: Record<string, unknown> = {}) => ({ instance: { data_source: 'staged', ...extra }, job_id: id });

describe("b probes a's jobs", () => {
  it("every route b may call answers about a's job id exactly as about an id nobody has, names nothing of a's, and changes nothing of a's", async () => {
    const aId = `a-job-${hex(4)}`;
    const aDone = await as(A).post('/process', chatJob(aId));
    expect(aDone.body).toMatchObject({ job_id: aId, critical_error: null, backend: simA.url });
    const liveId = `a-live-${hex(4)}`;
    const aLive = as(A).post('/process', staged(liveId, { run_ms: 2500 }));
    await waitFor("a's live job", async () => (await as(A).get(`/jobs/${liveId}`)).status === 200);

    const texts: string[] = [];
    const record = <T extends { body: unknown }>(r: T): T => {
      texts.push(JSON.stringify(r.body));
      return r;
    };
    const never = `never-${hex(4)}`;
    for (const id of [aId, liveId]) {
      // GET /jobs/:id, also naming a's tenant: byte for byte the answer about an id nobody has.
      for (const q of ['', '?tenant=a']) {
        const foreign = record(await as(B).get(`/jobs/${id}${q}`));
        const unknown = record(await as(B).get(`/jobs/${never}${q}`));
        expect([foreign.status, JSON.stringify(foreign.body).replaceAll(id, 'X')]).toEqual([
          unknown.status,
          JSON.stringify(unknown.body).replaceAll(never, 'X'),
        ]);
        expect(foreign.status).toBe(404);
      }
      for (const body of [{ job_id: id }, { job_id: id, tenant: 'a' }]) {
        const c = record(await as(B).post('/cancel', body));
        expect(c.body).toEqual({ status: 'ok', job_id: id, cancelled: false, state: 'unknown' });
      }
    }
    // Attaching to a's id runs a job of b's own, on b's backend; a's result is not handed over.
    const att = record(await as(B).post('/process', { ...chatJob(aId), attach: true }));
    expect(att.body).toMatchObject({ job_id: aId, critical_error: null, backend: simB.url });
    // b's own pool and pause: a's backend and a's calls are untouched.
    record(await as(B).post('/remove_llm_server', { address: simA.url }));
    record(await as(B).post('/pause', { mode: 'wait' }));
    record(await as(B).post('/resume'));
    record(await as(B).get('/status'));
    expect(record(await as(B).post('/clear_llm_server', { tenant: 'a' })).status).toBe(403);
    for (const route of ['/add_llm_server', '/remove_llm_server'])
      expect(record(await as(B).post(route, { address: spare.url, tenant: 'a' })).status).toBe(403);
    for (const route of ['/stop', '/start', '/drain', '/workers']) expect(record(await as(B).post(route, {})).status).toBe(403);
    const metrics = await as(B).get('/metrics');
    expect(metrics.status).toBe(403);
    texts.push(metrics.text);

    const all = texts.join('\n');
    for (const secret of [simA.url, MODEL_A, A, ADMIN, 'tenant "a"'])
      expect(all.includes(secret), `b's answers contain ${JSON.stringify(secret)}`).toBe(false);
    // a is unharmed: its live job finishes, its pool keeps its backend, its backend never saw b.
    expect((await aLive).body).toMatchObject({ job_id: liveId, critical_error: null });
    expect((await as(A).get(`/jobs/${aId}`)).body.result).toMatchObject({ backend: simA.url });
    expect((await as(A).get('/status')).body.backends).toEqual([expect.objectContaining({ address: simA.url })]);
    expect(simA.requestLog.filter((e) => !e.request_id.startsWith('a-'))).toEqual([]);
  });

  it("the time of an answer does not tell a's job ids from unknown ones (medians of 300 interleaved lookups)", async () => {
    const aId = `a-timed-${hex(4)}`;
    expect((await as(A).post('/process', staged(aId))).status).toBe(200);
    const one = async (id: string): Promise<number> => {
      const t0 = performance.now();
      const r = await fetch(`${srv.url}/jobs/${id}`, { headers: bearer(B) });
      await r.text();
      return performance.now() - t0;
    };
    const foreign: number[] = [];
    const unknown: number[] = [];
    for (let i = 0; i < 300; i++) {
      // Interleaved, order alternating: drift in the machine's load hits both alike.
      if (i % 2) {
        foreign.push(await one(aId));
        unknown.push(await one(`nobody-${i}`));
      } else {
        unknown.push(await one(`nobody-${i}`));
        foreign.push(await one(aId));
      }
    }
    const median = (xs: number[]) => [...xs].sort((p, q) => p - q)[xs.length >> 1]!;
    const [f, u] = [median(foreign), median(unknown)];
    expect(Math.abs(f - u), `median ${f.toFixed(3)} ms for a's id vs ${u.toFixed(3)} ms for unknown ids`).toBeLessThan(
      Math.max(1, 0.25 * u),
    );
  }, 120_000);
});

describe('b watches a through the console and the event stream', () => {
  it("GET /events from the first event with stats, the console's job list searched for a's id and its overview: nothing of a's; /ui/api/jobs/<a's id> answers as an unknown id", async () => {
    const aId = `a-console-${hex(4)}`;
    const stream = await openEvents(`${srv.url}/events?last_event_id=0&stats=1`, bearer(B));
    expect(stream.status).toBe(200);
    expect((await as(A).post('/process', chatJob(aId))).body).toMatchObject({ job_id: aId, critical_error: null });
    // A stats frame (every second) after a's job ended.
    const ended = Date.now();
    await stream.until((f) => f.event === 'stats' && Date.now() - ended > 1100, 10_000);
    stream.close();
    const texts = [JSON.stringify(stream.frames)];
    const search = await as(B).get(`/ui/api/jobs?q=${aId}`);
    expect(search.body.jobs).toEqual([]);
    texts.push(JSON.stringify(search.body), JSON.stringify((await as(B).get('/ui/api/overview')).body));
    const never = `never-${hex(4)}`;
    const foreign = await as(B).get(`/ui/api/jobs/${aId}`);
    const unknown = await as(B).get(`/ui/api/jobs/${never}`);
    expect([foreign.status, JSON.stringify(foreign.body).replaceAll(aId, 'X')]).toEqual([
      unknown.status,
      JSON.stringify(unknown.body).replaceAll(never, 'X'),
    ]);
    const all = texts.join('\n');
    for (const secret of [aId, simA.url, MODEL_A, 'tenant "a"', '"tenant":"a"'])
      expect(all.includes(secret), `b's console and events contain ${JSON.stringify(secret)}`).toBe(false);
  }, 60_000);

  it('b signing in to the console a thousand times does not sign a out', async () => {
    const login = async (token: string): Promise<Record<string, string>> => {
      const r = await fetch(`${srv.url}/ui/login`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: `token=${token}`,
      });
      expect(r.status).toBe(303);
      return { cookie: r.headers.get('set-cookie')!.split(';')[0]! };
    };
    const a = await login(A);
    expect((await get(`${srv.url}/ui/api/jobs`, a)).status).toBe(200);
    // Past the server's 1,000 sessions in all (50 at a time).
    for (let i = 0; i < 1001; i += 50) await Promise.all([...Array(Math.min(50, 1001 - i))].map(() => login(B)));
    expect((await get(`${srv.url}/ui/api/jobs`, a)).status, "a's console session after b's sign-ins").toBe(200);
  }, 60_000);
});

describe("b reaches for a's backends", () => {
  it.each([
    ['localhost', (port: string) => `http://localhost:${port}`],
    ['upper case', (port: string) => `HTTP://LocalHost:${port}/v1/`],
    ['127.1 shorthand', (port: string) => `http://127.1:${port}`],
    ['decimal IPv4', (port: string) => `http://2130706433:${port}`],
    ['0.0.0.0', (port: string) => `http://0.0.0.0:${port}`],
    ['trailing dot', (port: string) => `http://localhost.:${port}`],
  ])("a's backend under another name (%s) is refused as a's, and b's jobs never reach it", async (_what, alias) => {
    const port = new URL(simA.url).port;
    const before = simA.requestLog.length;
    const r = await as(B).post('/add_llm_server', { address: alias(port), probe: false });
    const bJob = await as(B).post('/process', chatJob(`b-alias-${hex(4)}`));
    // Leave b's pool as it was for the next case.
    await as(B).post('/remove_llm_server', { address: alias(port) });
    expect(simA.requestLog.length - before, "b's calls served by a's backend").toBe(0);
    expect([r.status, r.body?.error?.code]).toEqual([409, 'backend_owned']);
    expect(bJob.body).toMatchObject({ critical_error: null, backend: simB.url });
  });

  // Was a defect: backends were owned first come, first served. A tenant that knew (or guessed,
  // host:8000 on a shared cluster) the address another tenant's trainer was about to register took it
  // first: the owner's /add_llm_server was refused and the squatter's jobs ran on the owner's GPUs.
  // Now the operator may list a tenant's addresses (tenants[].allowed_backends): nobody else can take them.
  it("b registers a backend a is about to add: a's own /add_llm_server still succeeds and b's jobs never reach it", async () => {
    const taken = await as(B).post('/add_llm_server', { address: spare.url, probe: false });
    const mine = await as(A).post('/add_llm_server', { address: spare.url, probe: false });
    await as(B).post('/remove_llm_server', { address: spare.url });
    await as(A).post('/remove_llm_server', { address: spare.url });
    expect([taken.status, taken.body?.error?.code]).toEqual([409, 'backend_owned']);
    expect(mine.status).toBe(200);
    // Spelled another way (localhost for 127.0.0.1) it is the same backend, still a's.
    const alias = await as(B).post('/add_llm_server', { address: spare.url.replace('127.0.0.1', 'localhost'), probe: false });
    expect([alias.status, alias.body?.error?.code]).toEqual([409, 'backend_owned']);
    // And a registers nothing off its list.
    const off = await as(A).post('/add_llm_server', { address: simB.url.replace(/:\d+$/, ':9'), probe: false });
    expect([off.status, off.body?.error?.code]).toEqual([403, 'forbidden']);
    expect(off.body?.error?.message).toMatch(/allowed_backends/);
  });
});

describe("b crowds a out of the server's queues", () => {
  // Found here: max_queued_jobs was one first-come cap, so a tenant without max_queued filled it and
  // every other tenant got 503 queue_full whatever its weight. A tenant below its weighted share of
  // the cap is now still admitted.
  it('b fills max_queued_jobs (4) with its own jobs: a, with nothing queued, is still admitted; b, past its share, is refused', async () => {
    const ids = [...Array(5)].map((_, i) => `b-fill-${i}-${hex(3)}`);
    const hold = ids.map((id) => as(B).post('/process', staged(id, { init_ms: 5000 })));
    try {
      await waitFor('the queue full of b', async () => (await as(ADMIN).get('/status')).body.queued >= 4);
      const more = await as(B).post('/process', staged(`b-more-${hex(3)}`));
      expect([more.status, more.body?.error?.code, more.headers.get('retry-after')]).toEqual([503, 'queue_full', '1']);
      // Answered when the job ends, which is after b's INIT slot frees: b's jobs are cancelled first.
      const a = as(A).post('/process', staged(`a-after-${hex(3)}`));
      const early = await Promise.race([a, sleep(300).then(() => undefined)]);
      expect(early, "a's /process answered at once (refused)").toBeUndefined();
      for (const id of ids) await as(B).post('/cancel', { job_id: id });
      const done = await a;
      expect([done.status, done.body?.error?.code ?? null, done.body?.critical_error]).toEqual([200, null, null]);
    } finally {
      for (const id of ids) await as(B).post('/cancel', { job_id: id });
      await Promise.all(hold);
    }
  }, 60_000);
});
