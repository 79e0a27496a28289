import { describe, expect, it } from 'vitest';
import {
  formatPlan,
  loadPlaceConfig,
  parsePlaceConfig,
  planPlacement,
  type Lookup,
  type PlacementPlan,
} from '../../src/placement/index.js';

/** A resolver over a fixed table (a real implementation of the Lookup seam, like /etc/hosts). */
const table =
  (t: Record<string, string[]>): Lookup =>
  async (host) => {
    const ips = t[host];
    if (!ips) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return ips;
  };
const summary = (plan: PlacementPlan): Record<string, string[]> =>
  Object.fromEntries(plan.assignments.map((a) => [a.rollout_server, a.llm_servers.map((l) => `${l.address}#${l.phase}`)]));

describe('planPlacement', () => {
  it('phase 1 puts each LLM server on the least-loaded rollout server of its node, after DNS', async () => {
    const lookup = table({ 'node-a': ['10.0.0.1'], 'node-b': ['10.0.0.2'], 'gpu-a': ['10.0.0.1'], 'gpu-b': ['10.0.0.2'] });
    const plan = await planPlacement(
      [{ url: 'http://node-a:8006' }, { url: 'http://10.0.0.1:8007' }, { url: 'http://node-b:8006' }],
      [
        { address: 'http://gpu-a:9000/v1' },
        { address: 'http://gpu-a:9001/v1' },
        { address: 'gpu-a:9002', api: 'sglang' },
        { address: 'http://gpu-b:9000/v1' },
      ],
      { lookup },
    );
    expect(summary(plan)).toEqual({
      'http://node-a:8006': ['http://gpu-a:9000/v1#1', 'gpu-a:9002#1'],
      'http://10.0.0.1:8007': ['http://gpu-a:9001/v1#1'],
      'http://node-b:8006': ['http://gpu-b:9000/v1#1'],
    });
    expect(plan.assignments[0].ips).toEqual(['10.0.0.1']);
    expect(plan.assignments[0].llm_servers[1].api).toBe('sglang');
    expect(plan.warnings).toEqual([]);
  });

  it('phase 2 sends the rest round-robin to the least-loaded rollout servers', async () => {
    const lookup = table({ a: ['10.0.0.1'], b: ['10.0.0.2'], c: ['10.0.0.3'], far: ['10.9.9.9'] });
    const plan = await planPlacement(
      [{ url: 'http://a:1' }, { url: 'http://b:1' }, { url: 'http://c:1' }],
      [{ address: 'http://a:9' }, ...[1, 2, 3, 4, 5].map((k) => ({ address: `http://far:${k}` }))],
      { lookup },
    );
    // a already has one (phase 1), so b and c get the first remote ones; then all are even and it rotates.
    expect(summary(plan)).toEqual({
      'http://a:1': ['http://a:9#1', 'http://far:3#2'],
      'http://b:1': ['http://far:1#2', 'http://far:4#2'],
      'http://c:1': ['http://far:2#2', 'http://far:5#2'],
    });
  });

  it('an unresolvable host matches no node but is still placed, with a warning', async () => {
    const plan = await planPlacement([{ url: 'http://10.0.0.1:1' }], [{ address: 'http://nowhere.invalid:9' }], { lookup: table({}) });
    expect(summary(plan)).toEqual({ 'http://10.0.0.1:1': ['http://nowhere.invalid:9#2'] });
    expect(plan.warnings[0]).toMatch(/could not resolve nowhere\.invalid/);
  });

  it('rollout servers left without an LLM server share one (phase 3), or are warned about', async () => {
    const lookup = table({ a: ['10.0.0.1'], b: ['10.0.0.2'], c: ['10.0.0.3'] });
    const rollout = [{ url: 'http://a:1' }, { url: 'http://b:1' }, { url: 'http://c:1' }];
    const plan = await planPlacement(rollout, [{ address: 'http://a:9' }, { address: 'http://c:9' }], { lookup });
    expect(summary(plan)).toEqual({ 'http://a:1': ['http://a:9#1'], 'http://b:1': ['http://a:9#3'], 'http://c:1': ['http://c:9#1'] });
    const bare = await planPlacement(rollout, [{ address: 'http://a:9' }, { address: 'http://c:9' }], { lookup, fill_empty: false });
    expect(summary(bare)['http://b:1']).toEqual([]);
    expect(bare.warnings).toEqual(['http://b:1 gets no LLM server; its jobs will be refused with 503 no_llm_backends']);
    expect(formatPlan(bare)).toContain('(none)');
  });

  it('resolves real host names through the system resolver (localhost)', async () => {
    const plan = await planPlacement(
      [{ url: 'http://127.0.0.2:8006' }, { url: 'http://127.0.0.1:8006' }],
      [{ address: 'http://localhost:9000/v1' }],
    );
    // localhost is 127.0.0.1 (and ::1): the node of the second server; the first only shares it (phase 3).
    expect(summary(plan)).toEqual({
      'http://127.0.0.2:8006': ['http://localhost:9000/v1#3'],
      'http://127.0.0.1:8006': ['http://localhost:9000/v1#1'],
    });
    expect(plan.assignments[1].llm_servers[0].ips).toContain('127.0.0.1');
  });

  it('rejects duplicates and bad addresses, naming the key', async () => {
    await expect(planPlacement([{ url: 'http://a:1' }, { url: 'http://a:1/' }], [])).rejects.toThrow(
      /rollout_servers\[1\]\.url: http:\/\/a:1 is listed twice/,
    );
    await expect(planPlacement([{ url: 'http://a:1' }], [{ address: 'http://[oops' }])).rejects.toThrow(/llm_servers\[0\]\.address/);
    await expect(planPlacement([], [])).rejects.toThrow(/rollout_servers/);
  });
});

describe('place config', () => {
  it('accepts shorthands and a default token, and names the bad key', () => {
    const cfg = parsePlaceConfig({
      token: 'tok-12345678',
      rollout_servers: ['http://a:8006', { url: 'http://b:8006', token: 'own-12345678' }],
      llm_servers: ['http://a:9000/v1', { address: 'b:30000', api: 'sglang' }],
    });
    expect(cfg.rollout_servers).toEqual([
      { url: 'http://a:8006', token: 'tok-12345678' },
      { url: 'http://b:8006', token: 'own-12345678' },
    ]);
    expect(cfg.llm_servers[1]).toEqual({ address: 'b:30000', api: 'sglang' });
    expect(cfg.mode).toBe('replace');
    expect(() => parsePlaceConfig({ rollout_servers: ['http://a:1'], llm_servers: [{ address: 'x', api: 'tgi' }] }, 'p.yaml')).toThrow(
      /p\.yaml: `llm_servers\[0\]/,
    );
    expect(() => parsePlaceConfig({ rollout_servers: [], llm_servers: ['x'] })).toThrow(/rollout_servers/);
  });

  it('the example configs/place.yaml parses and plans', async () => {
    const cfg = await loadPlaceConfig('configs/place.yaml');
    const plan = await planPlacement(cfg.rollout_servers, cfg.llm_servers, { fill_empty: cfg.fill_empty });
    expect(plan.assignments.map((a) => a.llm_servers.map((l) => l.phase))).toEqual([[1, 2], [1]]);
  });
});
