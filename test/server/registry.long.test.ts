import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RolloutFleet } from '../../src/client/fleet.js';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { systemClock } from '../../src/util/clock.js';
import { get, post, stagedHandler } from './helpers.js';
import { ROOT, serveProcess } from '../reliability/helpers/servers.js';
import path from 'node:path';

const SLOW = path.join(ROOT, 'test/server/fixtures/slow-handler.mjs');

const ADMIN = 'registry-admin-01';
const bearer = { authorization: `Bearer ${ADMIN}` };
const waitFor = async (what: string, ok: () => Promise<boolean> | boolean, ms = 15_000): Promise<void> => {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
};

/**
 * `raas serve --join` as real processes (a hung one is SIGSTOPped, a drained one exits), and a
 * fleet that reads its servers from the registry while they join, drain and die.
 */
describe('raas serve --join as processes, and a fleet reading the registry', () => {
  let hub: RolloutServer;
  let sim: SimHandle;
  const joined: RolloutServer[] = [];
  const nodes = async () => (await get(`${hub.url}/nodes`, bearer)).body as Array<Record<string, unknown>>;
  beforeAll(async () => {
    sim = await startSim({});
    hub = await startRolloutServer({ port: 0, log_level: 'silent', token: ADMIN, registry: { missed_heartbeats: 3 } });
  });
  afterEach(async () => {
    await Promise.all(joined.splice(0).map((s) => s.close()));
  });
  afterAll(async () => {
    await hub?.close();
    await sim?.close();
  });
  const join = (extra: Record<string, unknown> = {}, onDrained?: () => void) =>
    startRolloutServer(
      {
        port: 0,
        log_level: 'silent',
        token: ADMIN,
        workers: { init: 3, run: 5, eval: 2 },
        llm: { backends: [{ address: sim.url }] },
        handler_modules: [SLOW],
        join: { url: hub.url, heartbeat_interval_s: 0.1, backends: [{ address: 'http://127.0.0.1:8000', api: 'sglang' }], ...extra },
      },
      { handlers: [stagedHandler(systemClock)], onDrained },
    ).then((s) => (joined.push(s), s));

  it('raas serve --join: a process that hangs (SIGSTOP) is reported dead after its missed heartbeats; POST /drain makes one leave and exit 0', async () => {
    const env = { RAAS_TEST_ADMIN: ADMIN };
    const args = (id: string) => [
      '--token-env',
      'RAAS_TEST_ADMIN',
      '--join',
      hub.url,
      '--node-id',
      id,
      '--heartbeat-interval',
      '0.1',
      '--handler',
      SLOW,
    ];
    const [hung, leaver] = await Promise.all([serveProcess(args('node-hung'), env), serveProcess(args('node-leaver'), env)]);
    try {
      await waitFor('both listed', async () => (await nodes()).filter((x) => x.healthy).length >= 2);
      hung.child.kill('SIGSTOP');
      await waitFor('dead', async () => (await nodes()).find((x) => x.node_id === 'node-hung')?.healthy === false, 10_000);
      hung.child.kill('SIGCONT');
      await waitFor('alive again', async () => (await nodes()).find((x) => x.node_id === 'node-hung')?.healthy === true, 10_000);
      expect((await post(`${leaver.url}/drain`, {}, bearer)).body).toEqual({ status: 'draining', jobs: 0 });
      expect(await leaver.exited).toEqual({ code: 0, signal: null });
      expect((await nodes()).some((x) => x.node_id === 'node-leaver')).toBe(false);
      expect(leaver.output()).toMatch(/drained \(0 jobs finished, 0 cancelled\); leaving/);
    } finally {
      hung.child.kill('SIGCONT');
      await Promise.all([hung.kill('SIGTERM'), leaver.kill('SIGTERM')]);
    }
  }, 120_000);

  it('a fleet reading the registry uses a server that joins, places no new group on one that drains, and moves the groups of a dead one', async () => {
    const fleet = new RolloutFleet({
      servers: [],
      registry: { registry: hub.url, token: ADMIN, poll_interval_ms: 50 },
      health_interval_ms: 200,
    });
    try {
      const a = await join({ node_id: 'fa' });
      await fleet.readCapacity();
      expect(fleet.servers().map((x) => x.url)).toEqual([a.url]);
      expect(fleet.liveCapacity()).toBe(5);
      const b = await join({ node_id: 'fb' });
      await waitFor('b in the fleet', () => fleet.servers().length === 2);
      const group = (tag: string, ms: number) =>
        fleet.submitGroup([0, 1].map((k) => ({ instance: { data_source: 'staged', run_ms: ms }, job_id: `${tag}-${k}` })));
      // Two groups: one per server (each goes to the least loaded).
      const g1 = group('g1', 600);
      const g2 = group('g2', 600);
      await waitFor('spread', () => fleet.servers().every((x) => x.in_flight === 2));
      await post(`${b.url}/drain`, {}, bearer);
      await waitFor('b draining in the fleet', () => fleet.servers().find((x) => x.url === b.url)?.draining === true);
      expect(fleet.liveCapacity()).toBe(5);
      const g3 = group('g3', 0);
      await waitFor('g3 placed', () => fleet.serverOf('g3-0') !== undefined);
      expect(fleet.serverOf('g3-0')).toBe(a.url);
      for (const r of await Promise.all([...g1, ...g2, ...g3])) expect(r).toMatchObject({ critical_error: null });
      await waitFor('b left', () => fleet.servers().length === 1);
      // A server process that hangs with groups on it: once the registry calls it dead, they move to a live server.
      const hung = await serveProcess(
        [
          '--token-env',
          'RAAS_TEST_ADMIN',
          '--join',
          hub.url,
          '--node-id',
          'fh',
          '--heartbeat-interval',
          '0.1',
          '--handler',
          SLOW,
          '--llm',
          sim.url,
        ],
        { RAAS_TEST_ADMIN: ADMIN },
      );
      try {
        await waitFor('hung in the fleet', () => fleet.servers().length === 2);
        await a.close();
        await waitFor('a left', () => fleet.servers().length === 1);
        const g4 = fleet.submitGroup([0, 1].map((k) => ({ instance: { data_source: 'slow', run_ms: 60_000 }, job_id: `g4-${k}` })));
        await waitFor('g4 on the hung server', () => fleet.serverOf('g4-0') === hung.url);
        hung.child.kill('SIGSTOP');
        const c = await join({ node_id: 'fc' });
        await waitFor('g4 moved', () => fleet.serverOf('g4-0') === c.url, 10_000);
        await post(`${c.url}/cancel`, { job_id: 'g4-0' }, bearer);
        await post(`${c.url}/cancel`, { job_id: 'g4-1' }, bearer);
        await Promise.allSettled(g4);
      } finally {
        hung.child.kill('SIGCONT');
        await hung.kill('SIGTERM');
      }
    } finally {
      await fleet.close();
    }
  }, 120_000);
});
