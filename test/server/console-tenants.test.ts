import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { openEvents } from '../helpers/sse.js';
import { get, post } from './helpers.js';

const ADMIN = 'console-admin-token';
const A = 'console-tenant-a-1';
const B = 'console-tenant-b-1';
const bearer = (t: string) => ({ authorization: `Bearer ${t}` });

// Two tenants on one server: the event stream and the console show each tenant its own jobs and
// backends, the admin all of them, and a tenant's console session is that tenant.
describe('the console and GET /events with tenants', () => {
  let simA: SimHandle;
  let simB: SimHandle;
  let srv: RolloutServer;
  const chat = (token: string, id: string) =>
    post(`${srv.url}/process`, { instance: { data_source: 'chat', instance_id: id, pass_rate: 1 }, job_id: id }, bearer(token));

  beforeAll(async () => {
    simA = await startSim({ model: 'team-a/M', filler: { median_tokens: 8, sigma: 0.1, max_tokens: 16 } });
    simB = await startSim({ model: 'team-b/M', filler: { median_tokens: 8, sigma: 0.1, max_tokens: 16 } });
    process.env.RAAS_CONSOLE_TENANT_A = A;
    process.env.RAAS_CONSOLE_TENANT_B = B;
    srv = await startRolloutServer({
      port: 0,
      log_level: 'silent',
      token: ADMIN,
      tenants: [
        { name: 'a', token_env: 'RAAS_CONSOLE_TENANT_A', backends: [{ address: simA.url }] },
        { name: 'b', token_env: 'RAAS_CONSOLE_TENANT_B', backends: [{ address: simB.url }] },
      ],
    });
  });
  afterAll(async () => {
    await srv?.close();
    await simA?.close();
    await simB?.close();
  });

  it("streams a tenant its own jobs' and backends' events only, the admin everyone's, each named by tenant", async () => {
    const asA = await openEvents(`${srv.url}/events?last_event_id=0`, bearer(A));
    const asAdmin = await openEvents(`${srv.url}/events?last_event_id=0`, bearer(ADMIN));
    await Promise.all([chat(A, 'a-1'), chat(B, 'b-1')]);
    await asAdmin.until((f) => f.data.job_id === 'a-1' && f.data.state === 'done');
    await asAdmin.until((f) => f.data.job_id === 'b-1' && f.data.state === 'done');
    await asA.until((f) => f.data.job_id === 'a-1' && f.data.state === 'done');
    expect(new Set(asA.frames.map((f) => f.data.tenant))).toEqual(new Set(['a']));
    expect(asA.frames.some((f) => f.data.job_id === 'b-1' || f.data.backend?.address === simB.url)).toBe(false);
    expect(asA.frames.find((f) => f.event === 'backend')!.data.backend.address).toBe(simA.url);
    expect(new Set(asAdmin.frames.map((f) => f.data.tenant))).toEqual(new Set(['a', 'b']));
    asA.close();
    asAdmin.close();
  });

  it("lists and opens a tenant's own jobs only (another tenant's id is unknown), and its own backends", async () => {
    const listA = (await get(`${srv.url}/ui/api/jobs`, bearer(A))).body;
    expect(listA.jobs.map((j: { job_id: string }) => j.job_id)).toEqual(['a-1']);
    expect(listA.jobs[0].tenant).toBe('a');
    expect((await get(`${srv.url}/ui/api/jobs/b-1`, bearer(A))).body.error.code).toBe('job_not_found');
    expect((await get(`${srv.url}/ui/api/jobs/a-1`, bearer(A))).body.trajectory.job_id).toBe('a-1');
    const admin = (await get(`${srv.url}/ui/api/jobs`, bearer(ADMIN))).body;
    expect(admin.jobs.map((j: { job_id: string }) => j.job_id).sort()).toEqual(['a-1', 'b-1']);
    const ovA = (await get(`${srv.url}/ui/api/overview`, bearer(A))).body;
    expect(ovA.backends.map((b: { address: string; tenant: string }) => [b.tenant, b.address])).toEqual([['a', simA.url]]);
    expect(ovA.by_state).toEqual({ done: 1 });
    expect(ovA.tenants.map((t: { name: string }) => t.name)).toEqual(['a']);
    const ovAdmin = (await get(`${srv.url}/ui/api/overview`, bearer(ADMIN))).body;
    expect(ovAdmin.backends.map((b: { tenant: string }) => b.tenant).sort()).toEqual(['a', 'b']);
    expect(ovAdmin.tenants.map((t: { name: string; backends: number }) => [t.name, t.backends])).toEqual([
      ['a', 1],
      ['b', 1],
    ]);
  });

  it("signs a browser in with a tenant's token: the session is that tenant", async () => {
    const r = await fetch(`${srv.url}/ui/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `token=${B}`,
    });
    expect(r.status).toBe(303);
    const cookie = { cookie: r.headers.get('set-cookie')!.split(';')[0]! };
    const list = (await get(`${srv.url}/ui/api/jobs`, cookie)).body;
    expect(list.jobs.map((j: { job_id: string }) => j.job_id)).toEqual(['b-1']);
    // A tenant is no admin: server-wide routes stay closed to its session too.
    expect((await get(`${srv.url}/metrics`, cookie)).status).toBe(403);
  });
});
