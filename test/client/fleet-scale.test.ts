import { afterEach, describe, expect, it, vi } from 'vitest';
import { RolloutFleet } from '../../src/client/index.js';
import { startFakeServer, type FakeServer } from './fake-server.js';
import { until } from './until.js';

/**
 * What keeps a fleet's cost bounded as it grows: cancels to one server go a few at a time (each
 * held /process answer already holds a socket), and the periodic health checks stay within a
 * budget per round, checking down servers first and skipping servers whose answers arrive.
 */
const held = (id: string) => ({ instance: { data_source: 'chat', hold_ms: -1 }, job_id: id });
const instant = (id: string) => ({ instance: { data_source: 'chat', hold_ms: 0 }, job_id: id });

describe('RolloutFleet at scale', () => {
  const cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    vi.useRealTimers();
    for (const c of cleanup.splice(0).reverse()) await c();
  });
  async function servers(count: number): Promise<FakeServer[]> {
    const out: FakeServer[] = [];
    for (let i = 0; i < count; i++) {
      const s = await startFakeServer({ name: `S${i}` });
      cleanup.push(() => s.close());
      out.push(s);
    }
    return out;
  }

  it('cancels a burst of held jobs over at most four extra sockets per server', async () => {
    const [a] = await servers(1);
    const f = new RolloutFleet({ servers: [{ url: a.url }], health_interval_ms: 60_000 });
    cleanup.push(() => f.close());
    const ids = Array.from({ length: 40 }, (_, k) => `burst-r${k}`);
    const ps = f.submitGroup(ids.map(held));
    await until(() => ids.every((id) => a.jobs.has(id)), 'the 40 jobs held');
    expect(a.openSockets()).toBe(40);
    a.peakSockets = 0;
    await Promise.all(ids.map((id) => f.cancel(id)));
    const results = await Promise.all(ps);
    expect(results.every((r) => r.critical_error === 'cancelled')).toBe(true);
    // Unbounded, the 40 cancels would open 40 more connections while the 40 answers are still held.
    expect(a.peakSockets).toBeGreaterThan(0);
    expect(a.peakSockets).toBeLessThanOrEqual(40 + 4);
  });

  it('checks health within a budget per round, down servers first, and skips servers whose answers arrive', async () => {
    const all = await servers(6);
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    // 2 checks per second × 1 s: two servers per round.
    const f = new RolloutFleet({
      servers: all.map((s) => ({ url: s.url })),
      health_interval_ms: 1000,
      health_probes_per_s: 2,
      client: { backoff: { base_ms: 10, max_ms: 20 } },
    });
    cleanup.push(() => f.close());
    const checks = (): number[] => all.map((s) => s.log.filter((l) => l.path === '/health').length);
    const round = async (want: number[], what: string): Promise<void> => {
      await vi.advanceTimersByTimeAsync(1000);
      await until(() => checks().join() === want.join(), `${what}: checks ${want.join()} (have ${checks().join()})`);
    };
    await round([1, 1, 0, 0, 0, 0], 'round 1');
    await round([1, 1, 1, 1, 0, 0], 'round 2');
    // S4 delivers a result just before round 3: it is not checked, and the budget goes to S5 and S0.
    const [r] = f.submitGroup([instant('seen-r0')], { server: all[4]!.url });
    await r;
    await round([2, 1, 1, 1, 0, 1], 'round 3');
    // S5 goes dark and is marked down by two failed checks (checkHealth skips a server whose check is still in flight).
    all[5]!.blackout(true);
    for (let i = 0; i < 50 && f.servers()[5]!.healthy; i++) await f.checkHealth();
    all[5]!.blackout(false);
    expect(f.servers()[5]!.healthy).toBe(false);
    // The next round's turn is S0 and S1, but a down server is checked in every round: S5 is back at once.
    await vi.advanceTimersByTimeAsync(1000);
    await until(() => f.servers()[5]!.healthy, 'S5 back after one round');
  });
});
