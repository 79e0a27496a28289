import { afterEach, describe, expect, it, vi } from 'vitest';
import { RolloutFleet } from '../../src/client/index.js';
import { CancelledError } from '../../src/protocol/errors.js';
import type { Result } from '../../src/protocol/process.js';
import { startFakeServer, type FakeServer } from './fake-server.js';
import { settleIo, until } from './until.js';

const chat = (id: string, hold_ms: number) => ({ instance: { data_source: 'chat', hold_ms }, job_id: id });
const group = (g: string, n: number, hold_ms = -1) => Array.from({ length: n }, (_, k) => chat(`${g}-r${k}`, hold_ms));

describe('RolloutFleet over real fastify servers', () => {
  const cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });
  async function servers(...names: string[]): Promise<FakeServer[]> {
    const out: FakeServer[] = [];
    for (const name of names) {
      const s = await startFakeServer({ name });
      cleanup.push(() => s.close());
      out.push(s);
    }
    return out;
  }
  function fleet(srvs: FakeServer[], health_interval_ms = 60_000): RolloutFleet {
    const f = new RolloutFleet({
      servers: srvs.map((s) => ({ url: s.url })),
      health_interval_ms,
      client: { backoff: { base_ms: 10, max_ms: 20 } },
    });
    cleanup.push(() => f.close());
    return f;
  }

  it('sends each group whole to the server with the fewest in-flight jobs', async () => {
    const [a, b] = await servers('A', 'B');
    const f = fleet([a, b]);
    const rest = [...f.submitGroup(group('g0', 3)), ...f.submitGroup(group('g1', 2))];
    for (const p of rest) p.catch(() => {}); // still held when the fleet closes
    const g2 = f.submitGroup(group('g2', 2)); // B has 2 < 3
    expect(
      f
        .servers()
        .map((s) => s.in_flight)
        .sort(),
    ).toEqual([3, 4]);
    expect(f.inFlight()).toBe(7);
    const holder = (id: string) => (a.jobs.has(id) ? 'A' : b.jobs.has(id) ? 'B' : '?');
    await until(() => ['g0', 'g1', 'g2'].every((g) => holder(`${g}-r0`) !== '?' && holder(`${g}-r1`) !== '?'), 'jobs to arrive');
    expect(holder('g0-r0')).toBe(holder('g0-r2'));
    expect(holder('g1-r0')).toBe(holder('g1-r1'));
    expect(holder('g1-r0')).not.toBe(holder('g0-r0'));
    expect(holder('g2-r0')).toBe(holder('g1-r0'));
    await Promise.all(['g2-r0', 'g2-r1'].map((id) => f.cancel(id)));
    const results = await Promise.all(g2);
    expect(results.map((r) => r.critical_error)).toEqual(['cancelled', 'cancelled']);
    expect(f.inFlight()).toBe(5);
  });

  it('fails over a group when its server is killed mid-group, keeping the job ids', async () => {
    const [a, b] = await servers('A', 'B');
    const f = fleet([a, b]);
    const ps = f.submitGroup(group('fo', 4, 300));
    await until(() => a.jobs.size + b.jobs.size === 4, 'jobs to arrive');
    const [victim, survivor] = a.jobs.size === 4 ? [a, b] : [b, a];
    await victim.crash();
    const results = await Promise.all(ps);
    expect(results.map((r) => r.job_id)).toEqual(['fo-r0', 'fo-r1', 'fo-r2', 'fo-r3']);
    expect(results.every((r) => r.backend === survivor.name && r.critical_error === null)).toBe(true);
    expect([...survivor.jobs.keys()].sort()).toEqual(['fo-r0', 'fo-r1', 'fo-r2', 'fo-r3']);
    // Every submission attaches, so a resend of an id never starts a second job on one server.
    for (const s of [a, b]) for (const l of s.log.filter((x) => x.path === '/process')) expect(l.body).toMatchObject({ attach: true });
    expect([...survivor.starts.values()]).toEqual([1, 1, 1, 1]);
    expect(f.stats().failed_over).toBe(4);
    expect(f.servers().find((s) => s.url === victim.url)?.healthy).toBe(false);
  });

  it('recovers results a server finished while unreachable, and ignores the later duplicates', async () => {
    const [a, b] = await servers('A', 'B');
    const f = fleet([a, b], 40);
    const ps = f.submitGroup(group('rec', 3, 250), { server: a.url });
    await until(() => a.jobs.size === 3, 'jobs on A');
    a.blackout(true); // A keeps running the jobs but answers nothing
    await until(() => b.jobs.size === 3, 'failover to B');
    for (const j of b.jobs.values()) clearTimeout(j.timer); // B's copies would never finish on their own
    await until(() => [...a.jobs.values()].every((j) => j.state === 'done'), 'A to finish meanwhile');
    a.blackout(false);
    const results = await Promise.all(ps);
    expect(results.map((r) => r.backend)).toEqual(['A', 'A', 'A']);
    expect(f.stats().recovered).toBe(3);
    // The copies on B were cancelled, and their cancelled results were ignored.
    await until(() => [...b.jobs.values()].every((j) => j.state === 'cancelled'), 'B copies cancelled');
    await until(() => f.stats().duplicates === 3, 'duplicates counted');
    expect(f.inFlight()).toBe(0);
  });

  it('a job a live server refuses (503 past the retries) goes elsewhere; the server stays healthy', async () => {
    const [a, b] = await servers('A', 'B');
    const f = fleet([a, b]);
    for (let k = 0; k < 3; k++) a.failProcess.push({ status: 503, code: 'queue_full' }); // 1 try + 2 retries
    const [p] = f.submitGroup([chat('ref-1', 0)], { server: a.url });
    expect((await p).backend).toBe('B');
    expect(f.servers().map((s) => s.healthy)).toEqual([true, true]);
    expect(f.stats().failed_over).toBe(0);
  });

  it('alone, a refusing server is tried again, and a persistent refusal rejects with its code', async () => {
    const [a] = await servers('A');
    const f = fleet([a]);
    for (let k = 0; k < 3; k++) a.failProcess.push({ status: 503, code: 'no_llm_backends' });
    const [p] = f.submitGroup([chat('ref-2', 0)]);
    expect((await p).backend).toBe('A');
    for (let k = 0; k < 100; k++) a.failProcess.push({ status: 503, code: 'server_stopped' });
    const [q] = f.submitGroup([chat('ref-3', 0)]);
    await expect(q).rejects.toMatchObject({ code: 'server_stopped' });
    expect(100 - a.failProcess.length).toBe(18); // (1 + 5 refusals) × (1 try + 2 retries)
  });

  it('the same job id submitted twice is one job with one result', async () => {
    const [a] = await servers('A');
    const f = fleet([a]);
    const [p1] = f.submitGroup([chat('dup-1', 30)]);
    const [p2] = f.submitGroup([chat('dup-1', 30)]);
    expect(p2).toBe(p1);
    await p1;
    expect(a.log.filter((l) => l.path === '/process')).toHaveLength(1);
  });

  it('cancel resolves once the server acknowledged; the result then says cancelled', async () => {
    const [a] = await servers('A');
    const f = fleet([a]);
    const [p] = f.submitGroup([chat('c-1', -1)]);
    await until(() => a.jobs.has('c-1'), 'job to start');
    await f.cancel('c-1');
    expect(a.jobs.get('c-1')?.state).toBe('cancelled');
    expect((await p).critical_error).toBe('cancelled');
    await f.cancel('c-1'); // settled: resolves at once
    await f.cancel('unknown');
  });

  it('an aborted group signal cancels its jobs on the server and rejects their promises', async () => {
    const [a] = await servers('A');
    const f = fleet([a]);
    const ac = new AbortController();
    const ps = f.submitGroup(group('ab', 2), { signal: ac.signal });
    await until(() => a.jobs.size === 2, 'jobs to start');
    ac.abort();
    for (const p of ps) await expect(p).rejects.toBeInstanceOf(CancelledError);
    await until(() => [...a.jobs.values()].every((j) => j.state === 'cancelled'), 'server-side cancel');
    expect(f.inFlight()).toBe(0);
  });

  it('waits for a healthy server when all are down, and places the group when one answers', async () => {
    const [a] = await servers('A');
    const f = fleet([a], 30);
    a.blackout(true);
    await f.checkHealth();
    expect(f.servers()[0].healthy).toBe(true); // one failed check is not enough (unhealthy_after: 2)
    await f.checkHealth();
    expect(f.servers()[0].healthy).toBe(false);
    const ps = f.submitGroup(group('wait', 2, 0));
    expect(f.servers()[0].in_flight).toBe(0);
    a.blackout(false);
    const results: Result[] = await Promise.all(ps);
    expect(results.map((r) => r.job_id)).toEqual(['wait-r0', 'wait-r1']);
  });

  it('checks health every health_interval_ms on the injected clock (fake timers)', async () => {
    const [a] = await servers('A');
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const f = fleet([a], 5000);
      const checks = () => a.log.filter((l) => l.path === '/health').length;
      await vi.advanceTimersByTimeAsync(4999);
      await settleIo();
      expect(checks()).toBe(0);
      await vi.advanceTimersByTimeAsync(1);
      await until(() => checks() === 1, 'the first check');
      a.blackout(true);
      for (let k = 1; k <= 2; k++) {
        await vi.advanceTimersByTimeAsync(5000);
        await until(() => f.servers()[0].healthy === k < 2, `check ${k} of the blackout`);
      }
      a.blackout(false);
      await vi.advanceTimersByTimeAsync(5000);
      await until(() => f.servers()[0].healthy, 'recovery');
    } finally {
      vi.useRealTimers();
    }
  });

  it('close rejects what is still waiting and is safe twice', async () => {
    const [a] = await servers('A');
    const f = fleet([a]);
    const [p] = f.submitGroup([chat('cl-1', -1)]);
    await until(() => a.jobs.has('cl-1'), 'job to start');
    await Promise.all([f.close(), f.close()]);
    await expect(p).rejects.toBeInstanceOf(CancelledError);
    await expect(f.submitGroup([chat('cl-2', 0)])[0]).rejects.toMatchObject({ code: 'not_ready' });
  });
});
