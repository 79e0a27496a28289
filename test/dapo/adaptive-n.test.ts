import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { betaMoment, chooseGroupSize, keptRollouts, mixedProbability, posteriorOf, PRIOR } from '../../src/dapo/adaptive-n.js';
import { parseTrainConfig } from '../../src/dapo/config.js';
import type { PromptRecord } from '../../src/dapo/history.js';
import { groupAdvantages } from '../../src/dapo/rewards.js';
import type { AdaptiveNConfig } from '../../src/protocol/config-train.js';
import { runDes } from './des.js';

const rec = (rewards: number[][], version = 0): PromptRecord => ({
  data_source: 'chat',
  instance_id: 0,
  submitted: rewards.length,
  skips: 0,
  skip_streak: 0,
  groups: rewards.map((r) => ({ step: 0, version, rewards: r, errors: 0, verdict: new Set(r).size > 1 ? 'accepted' : 'filtered' })),
});
const an = (a: Partial<AdaptiveNConfig>): AdaptiveNConfig => ({ min: 2, max: 16, batch: 'variable', target_mixed: 0.5, ...a });

describe('the pass-rate posterior', () => {
  it("Beta moments: E[p^k] of Beta(1, 1) is 1/(k+1); of Beta(½, ½) the arcsine law's", () => {
    expect(betaMoment({ a: 1, b: 1 }, 8)).toBeCloseTo(1 / 9, 12);
    // E[p^2] under Beta(½, ½) = (½ · 3/2) / (1 · 2) = 3/8
    expect(betaMoment(PRIOR, 2)).toBeCloseTo(3 / 8, 12);
  });
  it('P(mixed) of a group of n: 1 − E[p^n] − E[(1−p)^n]; zero for one rollout', () => {
    expect(mixedProbability({ a: 1, b: 1 }, 8)).toBeCloseTo(1 - 2 / 9, 12);
    expect(mixedProbability({ a: 1, b: 1 }, 1)).toBe(0);
    // a near-certain rate: p = 0.5 with huge evidence → 1 − 2 · 0.5^8
    expect(mixedProbability({ a: 5e6, b: 5e6 }, 8)).toBeCloseTo(1 - 2 / 256, 5);
  });
  it('adds every reward (clipped to [0, 1]) as a success or failure, old groups fading by half-life', () => {
    expect(
      posteriorOf(
        rec([
          [1, 0, 1],
          [2, -1],
        ]),
        0,
        null,
      ),
    ).toEqual({ a: 0.5 + 3, b: 0.5 + 2 });
    const p = posteriorOf(rec([[1, 1]], 0), 10, 10);
    expect(p.a).toBeCloseTo(0.5 + 1, 12);
    expect(p.b).toBeCloseTo(0.5, 12);
  });
  it('P(mixed) grows with n and shrinks as the evidence says the prompt is always failed', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0.05, max: 50, noNaN: true }),
        fc.double({ min: 0.05, max: 50, noNaN: true }),
        fc.integer({ min: 2, max: 40 }),
        (a, b, n) => {
          expect(mixedProbability({ a, b }, n + 1)).toBeGreaterThanOrEqual(mixedProbability({ a, b }, n) - 1e-12);
        },
      ),
    );
    const afterGroups = (groups: number) =>
      mixedProbability(posteriorOf(rec(Array.from({ length: groups }, () => Array(8).fill(0))), 0, null), 8);
    expect(afterGroups(1)).toBeLessThan(mixedProbability(PRIOR, 8));
    expect(afterGroups(3)).toBeLessThan(afterGroups(1));
  });
});

describe('chooseGroupSize', () => {
  it('variable: more rollouts where a group is likely mixed, a cheap probe where it is likely uniform, within [min, max]', () => {
    const mixed = posteriorOf(rec([[0, 1, 1, 0, 1, 0, 0, 1]]), 0, null);
    const never = posteriorOf(rec([Array(8).fill(0), Array(8).fill(0), Array(8).fill(0)]), 0, null);
    const cfg = an({ min: 4, max: 16 });
    const nm = chooseGroupSize(cfg, 8, mixed);
    const nn = chooseGroupSize(cfg, 8, never);
    expect(nm).toBeGreaterThan(nn);
    expect(nm).toBeLessThanOrEqual(16);
    expect(nn).toBeGreaterThanOrEqual(4);
    fc.assert(
      fc.property(fc.double({ min: 0.01, max: 100, noNaN: true }), fc.double({ min: 0.01, max: 100, noNaN: true }), (a, b) => {
        const k = chooseGroupSize(cfg, 8, { a, b });
        expect(Number.isInteger(k) && k >= 4 && k <= 16).toBe(true);
      }),
    );
  });
  it('fixed: n where a group of n is likely mixed; larger for a rarely solved prompt; n when even max would not mix it', () => {
    const cfg = an({ batch: 'fixed', max: 32, target_mixed: 0.5 });
    expect(chooseGroupSize(cfg, 8, { a: 40, b: 40 })).toBe(8);
    // p ≈ 0.05 with much evidence: P(mixed) at 8 is ≈ 0.34, reaches 0.5 at 14
    const rare = { a: 50, b: 950 };
    const k = chooseGroupSize(cfg, 8, rare);
    expect(k).toBe(14);
    expect(mixedProbability(rare, k)).toBeGreaterThanOrEqual(0.5);
    expect(mixedProbability(rare, k - 1)).toBeLessThan(0.5);
    expect(chooseGroupSize(cfg, 8, { a: 0.5, b: 400 })).toBe(8);
  });
});

describe('keptRollouts: n of a larger mixed group for a fixed batch', () => {
  it('keeps n distinct rollouts including a lowest and a highest reward, ascending, deterministic per seed', () => {
    const rewards = [0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    const k = keptRollouts(rewards, 8, 42);
    expect(k).toHaveLength(8);
    expect([...k].sort((a, b) => a - b)).toEqual(k);
    expect(k).toContain(2);
    expect(keptRollouts(rewards, 8, 42)).toEqual(k);
    expect(keptRollouts([1, 0, 1], 8, 1)).toEqual([0, 1, 2]);
  });
  it("follows the group's reward distribution (its quantiles) and stays mixed", () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom(0, 1), { minLength: 9, maxLength: 48 }),
        fc.integer({ min: 2, max: 8 }),
        fc.integer(),
        (rewards, n, seed) => {
          fc.pre(new Set(rewards).size > 1);
          const k = keptRollouts(rewards, n, seed);
          expect(new Set(k).size).toBe(n);
          const kept = k.map((i) => rewards[i]!);
          expect(new Set(kept).size).toBe(2);
          const share = rewards.filter((r) => r === 1).length / rewards.length;
          const keptShare = kept.filter((r) => r === 1).length / n;
          // evenly spaced ranks: within one rollout of the group's share, except that both outcomes stay
          expect(Math.abs(keptShare - share)).toBeLessThanOrEqual(1 / (n - 1) + 1e-9);
        },
      ),
    );
  });
});

describe('DapoCore with adaptive n (discrete-event fleet)', () => {
  const rate = (i: number): number => [0.05, 0.5, 0.95, 0, 1][i % 5]!;
  it('variable: groups of different sizes in [min, max], advantages over the whole group', () => {
    const r = runDes({
      seed: 5,
      capacity: 48,
      steps: 20,
      prompts: 100,
      passRate: rate,
      config: { n: 8, batch_size: 6, selection: { adaptive_n: { min: 4, max: 16 } } },
    });
    expect(r.batches).toHaveLength(20);
    expect(r.violations).toEqual([]);
    const sizes = new Set(r.batches.flatMap((b) => b.groups.map((g) => g.rollouts.length)));
    expect(sizes.size).toBeGreaterThan(1);
    for (const b of r.batches) {
      for (const g of b.groups) {
        expect(g.rollouts.length).toBeGreaterThanOrEqual(4);
        expect(g.rollouts.length).toBeLessThanOrEqual(16);
        const adv = groupAdvantages(g.rollouts.map((x) => x.shaped_reward));
        g.rollouts.forEach((x, i) => expect(x.advantage).toBeCloseTo(adv[i]!, 9));
      }
      expect(Number(b.stats.mean_group_size)).toBeGreaterThanOrEqual(4);
    }
  });
  it('fixed: every group in a batch has exactly n rollouts; larger groups are trimmed and counted', () => {
    const r = runDes({
      seed: 5,
      capacity: 64,
      steps: 20,
      prompts: 100,
      passRate: rate,
      config: { n: 8, batch_size: 6, selection: { adaptive_n: { batch: 'fixed', max: 32 } } },
    });
    expect(r.batches).toHaveLength(20);
    for (const b of r.batches) for (const g of b.groups) expect(g.rollouts).toHaveLength(8);
    const trimmed = r.batches.reduce((a, b) => a + Number(b.stats.rollouts_trimmed), 0);
    expect(trimmed).toBeGreaterThan(0);
    expect(r.core.totals.rollouts_trimmed).toBe(trimmed);
    // the kept rollouts keep their own job ids and trajectory ids
    for (const b of r.batches) for (const g of b.groups) expect(new Set(g.rollouts.map((x) => x.job_id)).size).toBe(8);
  });
  it('refuses bounds that cannot hold', () => {
    expect(() => parseTrainConfig({ dataset: { path: 'x' }, n: 8, selection: { adaptive_n: { min: 10, max: 4 } } })).toThrow(
      /selection\.adaptive_n\.min.*10.*max/,
    );
    expect(() => parseTrainConfig({ dataset: { path: 'x' }, n: 8, selection: { adaptive_n: { batch: 'fixed', max: 4 } } })).toThrow(
      /max.*below n=8/,
    );
    expect(() => parseTrainConfig({ dataset: { path: 'x' }, n: 1, selection: { adaptive_n: { max: 4 } } })).toThrow(/n ≥ 2/);
  });
});
