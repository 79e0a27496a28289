import { z } from 'zod';
import { rng, seedOf } from '../util/hash.js';

/**
 * How hard each task instance is for the simulated policy, and how that moves as the weights
 * update (`difficulty` in the simulator's options).
 *
 * - `beta` (default): the instance's seeded Beta draw `p` (the policies' `policy.alpha/beta`),
 *   raised by `boost_per_update` per weight update; an instance drawn at 0 stays unsolved.
 * - `logit`: a model of a real dataset under a policy that learns. Each instance has a logit
 *   `a ~ Normal(mean, spread)` and a learning rate `k ~ Normal(learn, learn_spread)` per update;
 *   its pass rate after `u` updates is sigmoid(a + k·u). A wide spread puts many instances near 0
 *   and 1 with a band in between (spread 4, mean −0.5: about 27 % below 0.05, 19 % above 0.95,
 *   so more than half the groups of 8 have equal rewards); a spread of `k` makes most instances get
 *   easier, some faster than others, and a few harder (a policy forgets too). An `unsolvable` share
 *   never passes (a wrong reference answer, a task beyond the model).
 * - `fixed`: every instance passes with `pass_rate`, whatever the updates: 1 plays every instance
 *   right (does the grader ever pay?), 0 every one wrong, 0.5 a coin per rollout (mixed groups).
 */
export const SimDifficulty = z
  .strictObject({
    model: z.enum(['beta', 'logit', 'fixed']).default('beta'),
    mean: z.number().default(-0.5),
    spread: z.number().nonnegative().default(4),
    learn: z.number().default(0.1),
    learn_spread: z.number().nonnegative().default(0.1),
    unsolvable: z.number().min(0).max(1).default(0.1),
    /** `fixed`: every instance's pass rate. */
    pass_rate: z.number().min(0).max(1).default(1),
  })
  .default({ model: 'beta', mean: -0.5, spread: 4, learn: 0.1, learn_spread: 0.1, unsolvable: 0.1, pass_rate: 1 });
export type SimDifficulty = z.infer<typeof SimDifficulty>;

/** The success probability of an instance after a number of weight updates. */
export interface DifficultyModel {
  /** `key` names the instance (task and id); `base` is its Beta draw; `updates` the backend's weight updates. */
  passRate(key: string, base: number, updates: number): number;
}

/** The `beta` rule: the Beta draw plus `boost` per update, capped at 1; 0 stays 0. */
export function linearPassRate(base: number, boost: number, updates: number): number {
  return base === 0 ? 0 : Math.min(1, base + boost * updates);
}

interface Latent {
  a: number;
  k: number;
  unsolvable: boolean;
}

/** The model the options describe; `seed` makes the `logit` instance draws (the simulator's seed). */
export function difficultyModel(d: SimDifficulty, opts: { seed: number; boostPerUpdate: number }): DifficultyModel {
  if (d.model === 'beta') return { passRate: (_key, base, updates) => linearPassRate(base, opts.boostPerUpdate, updates) };
  if (d.model === 'fixed') return { passRate: () => d.pass_rate };
  const latent = new Map<string, Latent>();
  const of = (key: string): Latent => {
    let l = latent.get(key);
    if (!l) {
      const r = rng(seedOf(opts.seed, 'difficulty', key));
      l = { unsolvable: r() < d.unsolvable, a: d.mean + d.spread * normal(r), k: d.learn + d.learn_spread * normal(r) };
      if (latent.size > 200_000) latent.clear();
      latent.set(key, l);
    }
    return l;
  };
  return {
    passRate(key, _base, updates) {
      const l = of(key);
      return l.unsolvable ? 0 : 1 / (1 + Math.exp(-(l.a + l.k * updates)));
    },
  };
}

/** Box–Muller from a seeded uniform source. */
function normal(r: () => number): number {
  const u = r() || 1e-12;
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * r());
}
