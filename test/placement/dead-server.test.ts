import { afterAll, describe, expect, it } from 'vitest';
import { RolloutClient } from '../../src/client/index.js';
import { Coordinator } from '../../src/dapo/index.js';
import { registerBackends } from '../../src/dapo/backends.js';
import { applyPlacement, planPlacement } from '../../src/placement/index.js';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { chatDataset, crash } from '../dapo/helpers.js';

/**
 * Placement over the live part of the fleet (issue: a dead rollout server made every weight update
 * throw "placement not fully applied", so `raas train` stopped at the next step). Two loopback
 * "nodes", 127.0.0.5 and 127.0.0.6, each with a real rollout server and a simulated backend.
 */
describe('placement and weight updates with a dead rollout server', () => {
  const hosts = ['127.0.0.5', '127.0.0.6'];
  const cleanups: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c().catch(() => {});
  });

  const server = async (host: string, port = 0): Promise<RolloutServer> => {
    const s = await startRolloutServer({ host, port, workers: { init: 4, run: 4, eval: 4 }, log_level: 'silent' } as never);
    cleanups.push(() => s.close());
    return s;
  };
  const sim = async (host: string): Promise<SimHandle> => {
    const s = await startSim({ host, seed: 1, latency: { decode_ms_per_token: 2 }, abort_on_weight_update: false });
    cleanups.push(() => s.close());
    return s;
  };
  const backendsOf = async (url: string): Promise<string[]> => {
    const c = new RolloutClient({ url });
    try {
      return (await c.status()).backends.map((b) => `${b.address}@${b.weight_version}`).sort();
    } finally {
      c.close();
    }
  };

  it('applyPlacement: skip_unreachable reports a refused server and applies the rest; without it the call rejects naming the server', async () => {
    const live = await server(hosts[0]);
    const dead = await server(hosts[1]);
    const deadUrl = dead.url;
    await dead.close();
    const llm = await sim(hosts[0]);
    const plan = await planPlacement([{ url: live.url }, { url: deadUrl }], [{ address: llm.url }]);
    const fast = [new RolloutClient({ url: live.url, retries: 0 }), new RolloutClient({ url: deadUrl, retries: 0 })];
    cleanups.push(async () => fast.forEach((c) => c.close()));

    const report = await applyPlacement(plan, { clients: fast, weight_version: '3', skip_unreachable: true });
    expect(report.servers.map((s) => s.rollout_server)).toEqual([live.url]);
    expect(report.skipped.map((s) => s.rollout_server)).toEqual([deadUrl]);
    expect(report.skipped[0].error).toMatch(/ECONNREFUSED/);
    expect(await backendsOf(live.url)).toEqual([`${llm.url}@3`]);

    await expect(applyPlacement(plan, { clients: fast, weight_version: '4' })).rejects.toThrow(
      new RegExp(`placement not fully applied: ${deadUrl}`),
    );
  });

  it('registerBackends: plans over the servers that answer /health only, and fails only when none answers', async () => {
    const a = await server(hosts[0]);
    const b = await server(hosts[1]);
    const simA = await sim(hosts[0]);
    const simB = await sim(hosts[1]);
    const clients = [a, b].map((s) => new RolloutClient({ url: s.url }));
    cleanups.push(async () => clients.forEach((c) => c.close()));
    const backends = [
      { address: simA.url, api: 'vllm' as const },
      { address: simB.url, api: 'vllm' as const },
    ];

    const first = await registerBackends(clients, backends, '1');
    expect(first?.skipped).toEqual([]);
    expect(await backendsOf(a.url)).toEqual([`${simA.url}@1`]);
    expect(await backendsOf(b.url)).toEqual([`${simB.url}@1`]);

    await b.close();
    const second = await registerBackends(clients, backends, '2');
    expect(second?.skipped.map((s) => s.rollout_server)).toEqual([b.url]);
    // B's backend still answers, so it moves to the live server (round-robin phase) rather than idle.
    expect(second?.plan.assignments.map((x) => [x.rollout_server, x.llm_servers.map((l) => [l.address, l.phase])])).toEqual([
      [
        a.url,
        [
          [simA.url, 1],
          [simB.url, 2],
        ],
      ],
    ]);
    expect(await backendsOf(a.url)).toEqual([`${simA.url}@2`, `${simB.url}@2`].sort());

    await a.close();
    await expect(registerBackends(clients, backends, '3')).rejects.toMatchObject({ code: 'server_unreachable' });
  });

  it('Coordinator: a rollout server killed after the first step; weight updates and the next steps go on over the survivor, and a restarted server is placed again', async () => {
    const a = await server(hosts[0]);
    const b = await server(hosts[1]);
    const simA = await sim(hosts[0]);
    const simB = await sim(hosts[1]);
    const c = new Coordinator({
      name: 'dead-srv',
      seed: 4,
      servers: [{ url: a.url }, { url: b.url }],
      backends: [
        { address: simA.url, api: 'vllm' },
        { address: simB.url, api: 'vllm' },
      ],
      dataset: { path: chatDataset(80) },
      n: 4,
      batch_size: 2,
      steps: 4,
      health_interval_ms: 200,
    });
    cleanups.push(() => c.close());

    const b0 = await c.nextBatch({ timeout_s: 30 });
    // Node-affine at start: each server holds the backend on its own address.
    expect(await backendsOf(a.url)).toEqual([`${simA.url}@0`]);
    expect(await backendsOf(b.url)).toEqual([`${simB.url}@0`]);

    const bPort = Number(new URL(b.url).port);
    crash(b);
    // Before the fix this threw "placement not fully applied: …/add_llm_server: connect ECONNREFUSED".
    await expect(c.updateWeights({})).resolves.toEqual({ policy_version: 1 });
    expect(await backendsOf(a.url)).toEqual([`${simA.url}@1`, `${simB.url}@1`].sort());
    const b1 = await c.nextBatch({ timeout_s: 30 });

    // The node's server comes back on the same address: the next update places its backend there again.
    await b.close();
    const again = await server(hosts[1], bPort);
    await expect(c.updateWeights({})).resolves.toEqual({ policy_version: 2 });
    expect(await backendsOf(again.url)).toEqual([`${simB.url}@2`]);
    expect(await backendsOf(a.url)).toEqual([`${simA.url}@2`]);
    const b2 = await c.nextBatch({ timeout_s: 30 });

    expect([b0, b1, b2].map((x) => [x.step, x.groups.length])).toEqual([
      [0, 2],
      [1, 2],
      [2, 2],
    ]);
    await c.close();
  });
});
