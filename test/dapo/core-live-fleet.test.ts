import { afterAll, describe, expect, it } from 'vitest';
import { RolloutFleet } from '../../src/client/fleet.js';
import { Coordinator } from '../../src/dapo/index.js';
import { startRolloutServer } from '../../src/server/index.js';
import { startSim } from '../../src/sim/index.js';
import { chatDataset, crash } from './helpers.js';

const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
});

/** An in-process rollout server with `run` RUN workers on a simulated backend; `port` to restart one where it was. */
async function server(simUrl: string, run: number, port = 0) {
  const s = await startRolloutServer({
    port,
    host: '127.0.0.1',
    workers: { run },
    llm: { backends: [{ address: simUrl, api: 'vllm' }] },
    log_level: 'silent',
  } as never);
  cleanups.push(() => s.close());
  return s;
}

const until = async (fn: () => boolean, what: string, ms = 15_000): Promise<void> => {
  const end = Date.now() + ms;
  while (!fn()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

/**
 * Capacity follows the live fleet: the admission cap was read once at start, so
 * after a server died the coordinator kept its share of jobs in flight and piled them onto the
 * survivors' queues. Now the cap is the live servers' workers (or their share of max_inflight_jobs),
 * read again whenever a server goes down or comes back.
 */
describe('admission cap over the live fleet (real rollout servers, simulated backend)', () => {
  it('a server crash takes its workers out of the cap, so the survivor is not overloaded; its restart brings them back', async () => {
    const sim = await startSim({ seed: 1, latency: { decode_ms_per_token: 3 }, abort_on_weight_update: false });
    cleanups.push(() => sim.close());
    const a = await server(sim.url, 4);
    let b = await server(sim.url, 4);
    const bUrl = b.url;
    const c = new Coordinator({
      name: 'cap',
      seed: 2,
      servers: [{ url: a.url }, { url: bUrl }],
      dataset: { path: chatDataset(400) },
      n: 2,
      batch_size: 2,
      max_staleness: 2,
      steps: 100,
      health_interval_ms: 100,
    });
    cleanups.push(() => c.close());
    // A fleet of our own on the same servers, to check the configured cap's share.
    const fleet = new RolloutFleet({ servers: [{ url: a.url }, { url: bUrl }], health_interval_ms: 100 });
    cleanups.push(() => fleet.close());
    await fleet.readCapacity();
    expect(fleet.liveCapacity()).toBe(8);
    expect(fleet.liveCapacity(6)).toBe(6);

    await c.nextBatch();
    expect(c.status().max_inflight_jobs).toBe(8);
    await until(() => c.status().servers.every((s) => s.in_flight > 0), 'jobs on both servers');

    crash(b);
    await until(() => c.status().max_inflight_jobs === 4, "the cap dropping to the survivor's 4 workers");
    await until(() => fleet.liveCapacity() === 4, 'our fleet seeing the crash');
    expect(fleet.liveCapacity(6)).toBe(3); // half the workers: half the configured cap
    expect(c.status().servers.find((s) => s.url === bUrl)).toMatchObject({ healthy: false, run_workers: 4 });
    // The crashed server's jobs moved to the survivor: the coordinator admits nothing until they drain below its 4 workers...
    await until(() => c.status().running_jobs <= 4, "running jobs within the survivor's workers", 30_000);
    // ...and from then on never exceeds them (before: 8 in flight, 4 of them queued on the survivor).
    let most = 0;
    const sample = setInterval(() => (most = Math.max(most, c.status().running_jobs)), 5);
    try {
      for (let i = 0; i < 3; i++) {
        await c.nextBatch();
        await c.updateWeights({});
      }
    } finally {
      clearInterval(sample);
    }
    expect(most).toBeLessThanOrEqual(4);
    expect(most).toBeGreaterThan(0);

    // Restarted on its port with 6 workers: it answers /health, its size is read again, the cap follows.
    await b.close();
    b = await server(sim.url, 6, Number(new URL(bUrl).port));
    await until(() => c.status().max_inflight_jobs === 10, 'the cap rising to 4 + 6 after the restart');
    await until(() => fleet.servers()[1].run_workers === 6 && fleet.liveCapacity() === 10, 'our fleet reading the new size');
    // Admission uses the restarted server's workers again.
    let after = 0;
    const sample2 = setInterval(() => (after = Math.max(after, c.status().running_jobs)), 5);
    try {
      for (let i = 0; i < 3; i++) {
        await c.nextBatch();
        await c.updateWeights({});
      }
    } finally {
      clearInterval(sample2);
    }
    expect(after).toBeGreaterThan(4);
    await c.close();
  }, 90_000);

  it('a server down at start is left out of the cap instead of failing the start; a fleet with no server up refuses naming them', async () => {
    const sim = await startSim({ seed: 1, abort_on_weight_update: false });
    cleanups.push(() => sim.close());
    const live = await server(sim.url, 3);
    const gone = await server(sim.url, 5);
    const goneUrl = gone.url;
    await gone.close();
    const fleet = new RolloutFleet({ servers: [{ url: live.url }, { url: goneUrl }], health_interval_ms: 60_000 });
    cleanups.push(() => fleet.close());
    await fleet.readCapacity();
    expect(fleet.servers().map((s) => [s.healthy, s.run_workers])).toEqual([
      [true, 3],
      [false, null],
    ]);
    expect(fleet.liveCapacity()).toBe(3);
    // Its size is unknown: it counts as the mean of the known ones, so the configured cap is halved.
    expect(fleet.liveCapacity(10)).toBe(5);
    const none = new RolloutFleet({ servers: [{ url: goneUrl }], health_interval_ms: 60_000 });
    cleanups.push(() => none.close());
    await expect(none.readCapacity()).rejects.toMatchObject({ code: 'server_unreachable', message: expect.stringContaining(goneUrl) });
  }, 30_000);
});
