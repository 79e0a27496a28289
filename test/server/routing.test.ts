import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LlmPoolConfig } from '../../src/protocol/config-server.js';
import { BackendPool, startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import type { Backend } from '../../src/server/llm/pool.js';
import type { BackendClient } from '../../src/server/llm/types.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { post } from './helpers.js';

const nullClient = (address: string): BackendClient => ({
  address,
  api: 'vllm',
  generate: () => Promise.reject(new Error('not called in pool tests')),
  maxModelLen: async () => undefined,
});
const poolOf = (cfg: Record<string, unknown>, n: number) => {
  const pool = new BackendPool(LlmPoolConfig.parse(cfg), nullClient);
  for (let i = 0; i < n; i++) pool.add(`http://b${i}:1`);
  return pool;
};

describe('backend pool', () => {
  it('active: every assignment takes a least-loaded backend, ties at random', () => {
    const pool = poolOf({}, 4);
    const held: Backend[] = [];
    const firsts = new Set<string>();
    for (let round = 0; round < 20; round++) {
      const p = poolOf({}, 4);
      firsts.add(p.acquire()!.address);
    }
    expect(firsts.size).toBeGreaterThan(1); // ties broken at random
    for (let i = 0; i < 40; i++) {
      const loads = pool.list().map((b) => b.active);
      const b = pool.acquire()!;
      expect(loads[pool.list().findIndex((x) => x.address === b.address)]).toBe(Math.min(...loads));
      held.push(b);
      if (i % 3 === 2) pool.release(held.shift()!);
    }
  });

  it('assigned: the key is assignments since registration, not live load', () => {
    const pool = poolOf({ routing: 'assigned', group_affinity: false }, 2);
    const a = pool.acquire()!;
    pool.release(a);
    // a is idle again but has one assignment: the next goes to the other backend.
    expect(pool.acquire()!.address).not.toBe(a.address);
  });

  it('round_robin: per request, in turn', () => {
    const pool = poolOf({ routing: 'round_robin' }, 3);
    const seq = Array.from({ length: 6 }, () => {
      const b = pool.nextRoundRobin()!;
      pool.release(b);
      return b.address;
    });
    expect(seq.slice(0, 3).sort()).toEqual(['http://b0:1', 'http://b1:1', 'http://b2:1']);
    expect(seq.slice(3)).toEqual(seq.slice(0, 3));
  });

  it('group affinity holds while the group backend is within the margin of the least loaded', () => {
    const pool = poolOf({ affinity_margin: 2 }, 2);
    const g = pool.acquire('g1')!;
    const other = pool.list().find((b) => b.address !== g.address)!.address;
    expect(pool.acquire('g1')!.address).toBe(g.address); // load 1 vs 0: within 2
    expect(pool.acquire('g1')!.address).toBe(g.address); // 2 vs 0: within 2
    const b4 = pool.acquire('g1')!; // 3 vs 0: past the margin, goes to the least loaded
    expect(b4.address).toBe(other);
    expect(pool.groupBackend('g1')!.address).toBe(other);
  });
});

// 1,000 concurrent chat jobs through a real rollout server and four simulated backends.
describe('routing under 1,000 concurrent chat jobs', () => {
  const sims: SimHandle[] = [];
  let srv: RolloutServer;
  const acquisitions: Array<{ chosen: number; min: number; group?: string }> = [];

  beforeAll(async () => {
    for (let i = 0; i < 4; i++)
      sims.push(
        await startSim({
          seed: i,
          latency: { overhead_ms: 3, decode_ms_per_token: 0.2 },
          filler: { median_tokens: 6, sigma: 0.3, max_tokens: 16 },
        }),
      );
    srv = await startRolloutServer({
      port: 0,
      log_level: 'silent',
      workers: { init: 64, run: 256, eval: 64 },
      llm: { affinity_margin: 8 },
    });
    for (const [i, s] of sims.entries()) await post(`${srv.url}/add_llm_server`, { address: s.url, weight_version: `w${i}` });
    // Observe the real pool's decisions: the loads at the moment of each assignment.
    const pool = srv.pool;
    const acquire = pool.acquire.bind(pool);
    pool.acquire = (groupId, exclude) => {
      const min = Math.min(...pool.list().map((b) => b.active));
      const b = acquire(groupId, exclude);
      if (b) acquisitions.push({ chosen: b.active - 1, min, group: groupId });
      return b;
    };
  }, 60_000);
  afterAll(async () => {
    await srv?.close();
    await Promise.all(sims.map((s) => s.close()));
  });

  it('each assignment picks a least-loaded backend, groups stay within the margin, turns stay on their backend', async () => {
    // Half the jobs without a group, half in groups of 8, all 1,000 submitted at once.
    const groupOf = (i: number) => (i < 496 ? undefined : `g${Math.floor(i / 8)}`);
    const answers = await Promise.all(
      Array.from({ length: 1000 }, (_, i) =>
        post(`${srv.url}/process`, {
          instance: { data_source: 'chat', instance_id: `c${i}`, turns: 2 },
          sampling_params: { max_tokens_per_turn: 6, seed: 1 },
          ...(groupOf(i) ? { group_id: groupOf(i) } : {}),
        }),
      ),
    );
    const results = answers.map((a) => {
      expect(a.status).toBe(200);
      return a.body;
    });
    for (const r of results) {
      expect(r.critical_error).toBeNull();
      expect(r.num_turns).toBe(2);
      // Every turn of a job stays on its backend: each turn's weight version is that backend's.
      const wv = `w${sims.findIndex((s) => s.url === r.backend)}`;
      expect(r.weight_versions).toEqual([wv, wv]);
    }
    expect(acquisitions).toHaveLength(1000);
    for (const a of acquisitions) {
      if (a.group === undefined) expect(a.chosen).toBe(a.min);
      else expect(a.chosen - a.min).toBeLessThanOrEqual(8);
    }
    const groups = new Map<string, Set<string>>();
    results.forEach((r, i) => {
      const g = groupOf(i);
      if (g) groups.set(g, (groups.get(g) ?? new Set()).add(r.backend));
    });
    const together = [...groups.values()].filter((s) => s.size === 1).length;
    expect(together / groups.size).toBeGreaterThan(0.8);
    for (const s of sims) expect(results.filter((r) => r.backend === s.url).length).toBeGreaterThan(100);
    const st = (await (await fetch(`${srv.url}/status`)).json()) as { backends: Array<{ active: number; assigned: number }> };
    expect(st.backends.reduce((sum, b) => sum + b.assigned, 0)).toBe(1000);
    expect(st.backends.every((b) => b.active === 0)).toBe(true);
  }, 180_000);
});
