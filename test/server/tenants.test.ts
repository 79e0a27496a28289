import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadServerConfig } from '../../src/server/config.js';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { systemClock } from '../../src/util/clock.js';
import { get, post, stagedHandler } from './helpers.js';

const ADMIN = 'admin-token-0001';
const A = 'tenant-a-token-01';
const B = 'tenant-b-token-02';
const C = 'tenant-capped-token-03';
const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
const waitFor = async (what: string, ok: () => Promise<boolean> | boolean, ms = 10_000): Promise<void> => {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

/**
 * A rollout server with two tenants, each with its own simulated vLLM backend serving another
 * model: what one tenant can see and do to the other's jobs and backends, over real HTTP.
 */
describe('tenants: isolation on one rollout server', () => {
  let simA: SimHandle;
  let simB: SimHandle;
  let srv: RolloutServer;
  let dir: string;
  const as = (t: string) => ({
    post: (route: string, body?: unknown) => post(`${srv.url}${route}`, body, bearer(t)),
    get: (route: string) => get(`${srv.url}${route}`, bearer(t)),
  });
  const staged = (id: string, extra: Record<string, unknown> = {}) => ({
    instance: { data_source: 'staged', run_ms: 400, ...extra },
    job_id: id,
  });

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'raas-tenants-'));
    simA = await startSim({ model: 'team-a/Model-8B', request_log: 200, filler: { median_tokens: 8, sigma: 0.1, max_tokens: 16 } });
    simB = await startSim({ model: 'team-b/Model-4B', request_log: 200, filler: { median_tokens: 8, sigma: 0.1, max_tokens: 16 } });
    const file = path.join(dir, 'b.token');
    await writeFile(file, `${B}\n`);
    await chmod(file, 0o600);
    process.env.RAAS_TEST_TENANT_A = A;
    srv = await startRolloutServer(
      {
        port: 0,
        log_level: 'silent',
        token: ADMIN,
        journal: { dir: path.join(dir, 'journal') },
        workers: { init: 8, run: 8, eval: 8 },
        tenants: [
          { name: 'a', token_env: 'RAAS_TEST_TENANT_A', weight: 2, backends: [{ address: simA.url }] },
          { name: 'b', token_file: 'b.token', max_queued: 3, backends: [{ address: simB.url }] },
          // Runs only staged jobs (no model call): its backend is never asked.
          { name: 'capped', token: C, max_running: 2, backends: [{ address: 'http://127.0.0.1:9' }] },
        ],
      },
      { handlers: [stagedHandler(systemClock)], baseDir: dir },
    );
  }, 60_000);
  afterAll(async () => {
    await srv?.close();
    await simA?.close();
    await simB?.close();
    delete process.env.RAAS_TEST_TENANT_A;
    await rm(dir, { recursive: true, force: true });
  });

  it('each token names its principal: no token 401, a tenant may not use server-wide routes, the admin runs no jobs', async () => {
    expect((await get(`${srv.url}/status`)).status).toBe(401);
    expect((await get(`${srv.url}/status`, bearer('not-a-known-token'))).status).toBe(401);
    for (const t of [A, B]) {
      for (const route of ['/stop', '/start', '/drain']) {
        const r = await as(t).post(route);
        expect([route, r.status, r.body.error.code]).toEqual([route, 403, 'forbidden']);
      }
      expect((await as(t).get('/metrics')).status).toBe(403);
    }
    const r = await as(ADMIN).post('/process', staged('admin-job'));
    expect([r.status, r.body.error.code]).toEqual([403, 'forbidden']);
    expect(r.body.error.message).toMatch(/tenant's token/);
    expect((await as(ADMIN).get('/metrics')).status).toBe(200);
    expect((await get(`${srv.url}/health`)).status).toBe(200);
  });

  it("another tenant's job id answers exactly like an unknown id (GET 404, /cancel 200 unknown), and it is counted", async () => {
    const running = as(A).post('/process', staged('secret-a', { run_ms: 600 }));
    await waitFor('a job of tenant a', async () => (await as(A).get('/jobs/secret-a')).status === 200);
    const foreign = await as(B).get('/jobs/secret-a');
    const unknown = await as(B).get('/jobs/never-was');
    expect(foreign.status).toBe(404);
    // Byte for byte the answer of an id nobody has, but for the id itself.
    expect(JSON.stringify(foreign.body).replaceAll('secret-a', 'X')).toBe(JSON.stringify(unknown.body).replaceAll('never-was', 'X'));
    const c = await as(B).post('/cancel', { job_id: 'secret-a' });
    expect(c.body).toEqual({ status: 'ok', job_id: 'secret-a', cancelled: false, state: 'unknown' });
    const done = await running;
    expect(done.body).toMatchObject({ job_id: 'secret-a', critical_error: null, reward: 1 });
    expect((await as(B).get('/jobs/secret-a')).status).toBe(404);
    expect((await as(A).get('/jobs/secret-a')).body).toMatchObject({ state: 'done' });
    // The admin sees every tenant's jobs.
    expect((await as(ADMIN).get('/jobs/secret-a')).body).toMatchObject({ state: 'done' });
    const metrics = (await as(ADMIN).get('/metrics')).text;
    expect(metrics).toMatch(/raas_cross_tenant_lookups_total\{tenant="b"\} [3-9]/);
  });

  it('both tenants may use the same job id: two jobs, two results; a cancel or an attach by one never reaches the other', async () => {
    const a = as(A).post('/process', staged('shared-id', { run_ms: 800, reward: 0.25 }));
    const b = as(B).post('/process', staged('shared-id', { run_ms: 800, reward: 0.75 }));
    await waitFor(
      'both jobs',
      async () => (await as(A).get('/jobs/shared-id')).status === 200 && (await as(B).get('/jobs/shared-id')).status === 200,
    );
    expect((await as(B).post('/cancel', { job_id: 'shared-id' })).body).toMatchObject({ cancelled: true });
    expect((await b).body).toMatchObject({ critical_error: 'cancelled' });
    expect((await a).body).toMatchObject({ critical_error: null, reward: 0.25 });
    // An attach by b finds b's own (cancelled) job, never a's result.
    const att = await as(B).post('/process', { ...staged('shared-id', { run_ms: 800, reward: 0.75 }), attach: true });
    expect(att.body).toMatchObject({ critical_error: 'cancelled' });
    const attA = await as(A).post('/process', { ...staged('shared-id', { run_ms: 800, reward: 0.25 }), attach: true });
    expect(attA.body).toMatchObject({ reward: 0.25 });
  });

  it("each tenant's jobs use only its own backends; it sees and changes only its own pool", async () => {
    const chat = (t: string, id: string) =>
      as(t).post('/process', {
        instance: { data_source: 'chat', turns: 2, pass_rate: 1 },
        job_id: id,
        sampling_params: { max_model_len: 2048 },
      });
    const answers = await Promise.all([...Array(4)].flatMap((_, i) => [chat(A, `chat-a-${i}`), chat(B, `chat-b-${i}`)]));
    for (const r of answers) expect(r.body).toMatchObject({ critical_error: null });
    const sent = (sim: SimHandle) => sim.requestLog.map((e) => e.request_id);
    expect(sent(simA).length).toBe(8);
    expect(sent(simB).length).toBe(8);
    expect(sent(simA).every((id) => id.startsWith('chat-a-'))).toBe(true);
    expect(sent(simB).every((id) => id.startsWith('chat-b-'))).toBe(true);
    for (const r of answers) expect(r.body.backend).toBe(r.body.job_id.startsWith('chat-a') ? simA.url : simB.url);

    const stA = (await as(A).get('/status')).body;
    expect(stA.backends).toEqual([expect.objectContaining({ address: simA.url, tenant: 'a' })]);
    // b may not take a's backend, nor name a's pool.
    const steal = await as(B).post('/add_llm_server', { address: simA.url });
    expect([steal.status, steal.body.error.code]).toEqual([409, 'backend_owned']);
    expect((await as(B).post('/clear_llm_server', { tenant: 'a' })).status).toBe(403);
    // a clearing its pool leaves b's alone; the admin names the tenant.
    expect((await as(A).post('/clear_llm_server')).body.backends).toEqual([]);
    expect((await as(B).get('/status')).body.backends).toHaveLength(1);
    const noBackend = await chat(A, 'chat-a-none');
    expect([noBackend.status, noBackend.body.error.code]).toEqual([503, 'no_llm_backends']);
    expect((await chat(B, 'chat-b-still')).body).toMatchObject({ critical_error: null });
    const back = await as(ADMIN).post('/add_llm_server', { address: simA.url, tenant: 'a' });
    expect(back.body.backends).toEqual([expect.objectContaining({ address: simA.url, tenant: 'a' })]);
    expect((await as(ADMIN).post('/add_llm_server', { address: simA.url })).body.error.message).toMatch(/tenant: this server has tenants/);
  });

  it("/status: a tenant sees its own jobs with the server's totals beside them; the admin sees every tenant", async () => {
    const a = [1, 2].map((i) => as(A).post('/process', staged(`st-a-${i}`, { run_ms: 500 })));
    const b = [1, 2, 3].map((i) => as(B).post('/process', staged(`st-b-${i}`, { run_ms: 500 })));
    await waitFor('five jobs in', async () => (await as(ADMIN).get('/status')).body.jobs === 5);
    const sa = (await as(A).get('/status')).body;
    expect(sa).toMatchObject({ jobs: 2, pending_jobs: 2, tenant: { name: 'a', weight: 2, jobs: 2 }, fleet: { jobs: 5, tenants: 3 } });
    const sb = (await as(B).get('/status')).body;
    expect(sb).toMatchObject({ jobs: 3, tenant: { name: 'b', jobs: 3, max_queued: 3 }, fleet: { jobs: 5 } });
    const admin = (await as(ADMIN).get('/status')).body;
    expect(admin.jobs).toBe(5);
    expect(admin.tenants.map((t: { name: string; jobs: number }) => [t.name, t.jobs])).toEqual([
      ['a', 2],
      ['b', 3],
      ['capped', 0],
    ]);
    expect(admin.backends.map((x: { tenant: string }) => x.tenant).sort()).toEqual(['a', 'b', 'capped']);
    await Promise.all([...a, ...b]);
  });

  it("a tenant past its max_queued gets 503 tenant_quota with Retry-After; the other tenant's jobs are still taken", async () => {
    // b: max_queued 3. Fill every INIT slot with a's jobs, then b's wait in the queue.
    const hold = [...Array(8)].map((_, i) => as(A).post('/process', staged(`hold-${i}`, { init_ms: 700, run_ms: 0 })));
    await waitFor('INIT full', async () => (await as(ADMIN).get('/status')).body.init === 8);
    const queued = [1, 2, 3].map((i) => as(B).post('/process', staged(`q-b-${i}`, { run_ms: 0 })));
    await waitFor('b queued', async () => (await as(B).get('/status')).body.queued === 3);
    const over = await as(B).post('/process', staged('q-b-4', { run_ms: 0 }));
    expect([over.status, over.body.error.code, over.headers.get('retry-after')]).toEqual([503, 'tenant_quota', '1']);
    expect(over.body.error.message).toMatch(/tenant "b".*max_queued \(3\)/);
    const fine = as(A).post('/process', staged('a-not-limited', { run_ms: 0 }));
    expect((await fine).status).toBe(200);
    await Promise.all([...hold, ...queued]);
  });

  it('max_running: at most that many of its jobs are inside stages at once, free slots or not; the rest wait', async () => {
    const jobs = [...Array(5)].map((_, i) => as(C).post('/process', staged(`cap-${i}`, { init_ms: 150, run_ms: 150, eval_ms: 150 })));
    let most = 0;
    let ended = false;
    const all = Promise.all(jobs).then(() => (ended = true));
    while (!ended) {
      const st = (await as(C).get('/status')).body;
      most = Math.max(most, st.in_stage);
      expect(st.in_stage).toBeLessThanOrEqual(2);
      expect(st.workers.run.size).toBe(2);
      await new Promise((r) => setTimeout(r, 15));
    }
    await all;
    expect(most).toBe(2);
    for (const r of await Promise.all(jobs)) expect(r.body).toMatchObject({ critical_error: null });
  });

  it("a tenant's /pause holds only its own jobs' model calls", async () => {
    const chat = (t: string, id: string) =>
      as(t).post('/process', {
        instance: { data_source: 'chat', turns: 1, pass_rate: 1 },
        job_id: id,
        sampling_params: { max_model_len: 2048 },
      });
    expect((await as(A).post('/pause', { mode: 'drain' })).body).toMatchObject({ status: 'paused' });
    let aDone = false;
    const a = chat(A, 'paused-a').then((r) => ((aDone = true), r));
    expect((await chat(B, 'free-b')).body).toMatchObject({ critical_error: null });
    await waitFor('a held', async () => (await as(A).get('/status')).body.generation.held === 1);
    expect(aDone).toBe(false);
    expect((await as(B).get('/status')).body.generation).toMatchObject({ paused: false, held: 0 });
    expect((await as(A).post('/resume')).body).toEqual({ status: 'running', released: 1 });
    expect((await a).body).toMatchObject({ critical_error: null });
  });

  it('per-tenant metrics: jobs by state, queue wait and stage time carry the tenant', async () => {
    const m = (await as(ADMIN).get('/metrics')).text;
    expect(m).toMatch(/raas_tenant_jobs_total\{tenant="a",state="done"\} [1-9]/);
    expect(m).toMatch(/raas_tenant_jobs_total\{tenant="b",state="cancelled"\} [1-9]/);
    expect(m).toMatch(/raas_queue_wait_seconds_count\{stage="init",tenant="capped"\} 5/);
    expect(m).toMatch(/raas_tenant_stage_seconds_sum\{stage="run",tenant="a"\} [0-9.]+/);
    expect(m).toMatch(/raas_tenant_jobs\{tenant="b",state="queued"\} 0/);
    // The server-wide series keep their names and labels.
    expect(m).toMatch(/raas_jobs_total\{state="done"\} [1-9]/);
  });

  it('priority: a job may ask for a class up to its tenant max_priority, never above', async () => {
    const r = await as(B).post('/process', { ...staged('too-high'), priority: 5 });
    expect([r.status, r.body.error.code]).toEqual([400, 'bad_request']);
    expect(r.body.error.message).toMatch(/max_priority 0/);
  });

  it('the journal carries the tenant: after a restart each tenant finds its own results and not the other', async () => {
    await as(A).post('/process', staged('journaled', { run_ms: 0, reward: 0.5 }));
    await as(B).post('/process', staged('journaled', { run_ms: 0, reward: 0.125 }));
    await srv.close();
    srv = await startRolloutServer(
      {
        port: 0,
        log_level: 'silent',
        token: ADMIN,
        journal: { dir: path.join(dir, 'journal') },
        tenants: [
          { name: 'a', token_env: 'RAAS_TEST_TENANT_A', backends: [{ address: simA.url }] },
          { name: 'b', token_file: 'b.token', backends: [{ address: simB.url }] },
          { name: 'c', token: 'tenant-c-token-03' },
        ],
      },
      { handlers: [stagedHandler(systemClock)], baseDir: dir },
    );
    expect((await as(A).get('/jobs/journaled')).body).toMatchObject({ state: 'done', result: { reward: 0.5 } });
    expect((await as(B).get('/jobs/journaled')).body).toMatchObject({ state: 'done', result: { reward: 0.125 } });
    expect((await as('tenant-c-token-03').get('/jobs/journaled')).status).toBe(404);
  });
});

describe('tenants: configuration', () => {
  it('refuses duplicate names and tokens, a tenant without a token, and server-wide llm.backends beside tenants', async () => {
    const msg = async (cfg: Record<string, unknown>) => {
      try {
        await startRolloutServer({ port: 0, log_level: 'silent', ...cfg });
        return 'started';
      } catch (e) {
        return (e as Error).message;
      }
    };
    expect(
      await msg({
        tenants: [
          { name: 'x', token: 'token-one-1' },
          { name: 'x', token: 'token-two-2' },
        ],
      }),
    ).toMatch(/"x" is used twice/);
    expect(
      await msg({
        tenants: [
          { name: 'x', token: 'token-one-1' },
          { name: 'y', token: 'token-one-1' },
        ],
      }),
    ).toMatch(/tenants\[1\]: its token is also tenant "x"'s/);
    expect(await msg({ token: 'token-one-1', tenants: [{ name: 'x', token: 'token-one-1' }] })).toMatch(/also the admin token/);
    expect(await msg({ tenants: [{ name: 'x' }] })).toMatch(/exactly one of token, token_file, token_env/);
    expect(await msg({ tenants: [{ name: 'x', token: 'token-one-1' }], llm: { backends: [{ address: 'http://127.0.0.1:9' }] } })).toMatch(
      /tenants\[\]\.backends/,
    );
  });

  it('a config file names the key of a bad tenant entry', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'raas-tenants-cfg-'));
    const file = path.join(dir, 'server.yaml');
    await writeFile(file, 'tenants:\n  - name: team-a\n    token: short\n    wieght: 2\n');
    await expect(loadServerConfig(file)).rejects.toMatchObject({
      message: expect.stringMatching(/tenants\[0\]\.wieght`: unknown key; did you mean `weight`/),
    });
    await rm(dir, { recursive: true, force: true });
  });
});
