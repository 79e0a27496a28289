import type { AdaptiveNConfig } from '../protocol/config-train.js';
import { rng, seedOf } from '../util/hash.js';
import type { PromptRecord } from './history.js';
import { recency } from './selection.js';

/** A Beta(a, b) belief about a prompt's pass rate. */
export interface Posterior {
  a: number;
  b: number;
}

/**
 * Jeffreys' Beta(½, ½): U-shaped like the pass rates of a real dataset under a given policy (many
 * prompts near 0 and 1), and the least informative for a rate.
 */
export const PRIOR: Posterior = { a: 0.5, b: 0.5 };

/**
 * The posterior of a prompt's pass rate under the current policy: the prior plus every rollout's
 * reward clipped to [0, 1] as a (fractional) success, each group weighted by how recent its policy
 * is (the same half-life selection uses), so old evidence fades as the policy moves.
 */
export function posteriorOf(r: PromptRecord | undefined, now: number, halfLife: number | null, prior: Posterior = PRIOR): Posterior {
  let { a, b } = prior;
  for (const g of r?.groups ?? []) {
    const w = recency(now, g.version, halfLife);
    for (const x of g.rewards) {
      const s = Math.min(1, Math.max(0, x));
      a += w * s;
      b += w * (1 - s);
    }
  }
  return { a, b };
}

/** E[p^k] for p ~ Beta(a, b): Π_{j<k} (a + j) / (a + b + j). */
export function betaMoment(p: Posterior, k: number): number {
  let m = 1;
  for (let j = 0; j < k; j++) m *= (p.a + j) / (p.a + p.b + j);
  return m;
}

/** Posterior-predictive probability that a group of `n` has both outcomes (is informative). */
export function mixedProbability(p: Posterior, n: number): number {
  if (n < 2) return 0;
  return Math.max(0, 1 - betaMoment(p, n) - betaMoment({ a: p.b, b: p.a }, n));
}

/**
 * The group size for a prompt with posterior `p`, base size `n`, within [min, max]:
 * - `variable`: min + (max − min) × P(a group of n is mixed). A rollout in a group that turns out
 *   mixed reaches the trainer and one in a uniform group is discarded, so a sample's expected use
 *   is about that probability: more samples go where they pay, cheap probes where the group will
 *   probably be uniform.
 * - `fixed` (the batch keeps n per group): the smallest m in [n, max] whose group is mixed with
 *   probability ≥ target_mixed, else n (neither more samples nor fewer buy a mixed group).
 */
export function chooseGroupSize(cfg: AdaptiveNConfig, n: number, p: Posterior): number {
  if (cfg.batch === 'variable') return Math.round(cfg.min + (cfg.max - cfg.min) * mixedProbability(p, n));
  for (let m = n; m <= cfg.max; m++) if (mixedProbability(p, m) >= cfg.target_mixed) return m;
  return n;
}

/**
 * For a `fixed` batch: which `n` of a larger mixed group's rollouts go into the batch. The rollouts
 * are ordered by reward (ties in a seeded random order) and `n` are taken at evenly spaced ranks,
 * the lowest and the highest included: the kept rewards follow the group's distribution (its
 * quantiles) and the subset is mixed whenever the group is. Returns ascending rollout indices.
 */
export function keptRollouts(rewards: readonly number[], n: number, seed: number): number[] {
  const m = rewards.length;
  if (m <= n) return rewards.map((_, i) => i);
  const r = rng(seed);
  const tie = rewards.map(() => r());
  const order = rewards.map((_, i) => i).sort((x, y) => rewards[x]! - rewards[y]! || tie[x]! - tie[y]!);
  const picked = new Set<number>();
  for (let j = 0; j < n; j++) picked.add(order[Math.round((j * (m - 1)) / (n - 1))]!);
  return [...picked].sort((x, y) => x - y);
}

/** The seed of a group's subset choice (deterministic, so a resumed run keeps the same subset). */
export function keepSeed(runSeed: number, groupIndex: number): number {
  return seedOf('adaptive-n-keep', runSeed, groupIndex);
}
