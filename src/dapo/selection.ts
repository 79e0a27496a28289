import { z } from 'zod';
import type { SelectionConfig } from '../protocol/config-train.js';
import type { HistoryGroup, PromptRecord } from './history.js';

/**
 * Which way a prompt's recent groups were uniform: `easy` (every rollout solved it: all rewards
 * equal and > 0) or `hard` (none did: all equal and ≤ 0).
 */
type StreakKind = 'easy' | 'hard';

/** The run of most recent all-equal groups of one kind, weighted by how recent their policy is. */
export interface Streak {
  kind: StreakKind;
  /** Groups in the run. */
  count: number;
  /** Σ 2^(−(v_now − v_group) / half_life): the run's length with older policies counting less. */
  weight: number;
}

/** What selection decided for one prompt. */
export interface Decision {
  skip: boolean;
  /** The probability it was submitted with (1 when its recent groups were not all equal). */
  keep: number;
  streak?: Streak;
  /** Submitted because it had been skipped `max_skips` times in a row. */
  forced?: boolean;
}

/** The selector's adaptive state (in the checkpoint). */
export const SelectorState = z.object({
  keep_easy: z.number(),
  keep_hard: z.number(),
  share_easy: z.number(),
  share_hard: z.number(),
  observed: z.number().int().nonnegative(),
});
export type SelectorState = z.infer<typeof SelectorState>;

/** The keep bases stay in GRESO's [0.05, 0.95]; the explore floor bounds the product. */
const KEEP_MIN = 0.05;
const KEEP_MAX = 0.95;

/** Weight of a group submitted under `version` seen from `now`. */
export function recency(now: number, version: number, halfLife: number | null): number {
  if (halfLife === null) return 1;
  return Math.pow(2, -Math.max(0, now - version) / halfLife);
}

/** Whether a finished group was uniform, and which way (errors are neither: they say nothing of the prompt). */
function uniformKind(g: HistoryGroup): StreakKind | undefined {
  if (g.verdict !== 'filtered') return undefined;
  return (g.rewards[0] ?? 0) > 0 ? 'easy' : 'hard';
}

/**
 * The prompt's current streak: its latest finished groups back to the first informative one (or
 * one uniform the other way); groups dropped on error are passed over.
 */
export function streakOf(r: PromptRecord | undefined, now: number, halfLife: number | null): Streak | undefined {
  if (!r) return undefined;
  let out: Streak | undefined;
  for (let i = r.groups.length - 1; i >= 0; i--) {
    const g = r.groups[i]!;
    if (g.verdict === 'dropped_error') continue;
    const kind = uniformKind(g);
    if (!kind || (out && out.kind !== kind)) break;
    out ??= { kind, count: 0, weight: 0 };
    out.count++;
    out.weight += recency(now, g.version, halfLife);
  }
  return out;
}

/**
 * Pre-rollout selection in the manner of GRESO (Zheng et al. 2025, "Act Only When It Pays";
 * Infini-AI-Lab/GRESO@b277843 verl/trainer/ttis/presampling_selector.py:102-147 and
 * verl/trainer/ppo/ray_trainer.py:1199-1219): a prompt whose latest groups were all equal is
 * submitted with probability keep^streak, where keep (one base for easy, one for hard prompts) moves
 * by `adapt_step` to hold the share of uniform groups at 1 − target_informative (two thirds of it
 * hard, one third easy, as GRESO splits its target). What differs, and why:
 * - the streak counts groups by recency (`half_life_versions`), so a prompt whose evidence comes from
 *   a much older policy returns sooner;
 * - the floor is `explore` (GRESO: 0.01, fixed), and `max_skips` bounds the skips in a row, so no
 *   prompt is starved however the probabilities move;
 * - the bases adapt a little after every finished group (adapt_step per batch_size groups, GRESO's
 *   rate per step) on a moving share, since an asynchronous step has no fixed set of groups;
 * - any reward scale: "easy" is all rewards equal and > 0, "hard" all equal and ≤ 0.
 * Pure: randomness comes in as a number, time as the policy version.
 */
export class Selector {
  private st: SelectorState;
  /** Finished groups the moving share averages over (then exponentially). */
  private readonly horizon: number;
  /** The bases' move per finished group: adapt_step per batch_size groups (GRESO's rate per step). */
  private readonly step: number;

  constructor(
    private readonly cfg: SelectionConfig,
    batchSize: number,
    state?: SelectorState,
  ) {
    this.st = state
      ? { ...state }
      : { keep_easy: cfg.initial_keep, keep_hard: cfg.initial_keep, share_easy: 0, share_hard: 0, observed: 0 };
    this.horizon = Math.max(8, 2 * batchSize);
    this.step = cfg.adapt_step / batchSize;
  }

  get enabled(): boolean {
    return this.cfg.mode === 'history';
  }

  state(): SelectorState {
    return { ...this.st };
  }

  /** Decides for a prompt with history `r` under policy `version`; `u` is a uniform draw in [0, 1). */
  decide(r: PromptRecord | undefined, version: number, u: number): Decision {
    if (!this.enabled) return { skip: false, keep: 1 };
    const streak = streakOf(r, version, this.cfg.half_life_versions);
    if (!streak) return { skip: false, keep: 1 };
    const base = streak.kind === 'easy' ? this.st.keep_easy : this.st.keep_hard;
    const keep = Math.min(1, Math.max(this.cfg.explore, Math.pow(base, streak.weight)));
    if ((r?.skip_streak ?? 0) >= this.cfg.max_skips) return { skip: false, keep, streak, forced: true };
    return { skip: u >= keep, keep, streak };
  }

  /** Adapts the keep bases to a finished group (its verdict and, when uniform, which way). */
  observe(g: HistoryGroup): void {
    if (g.verdict === 'dropped_error') return;
    const kind = uniformKind(g);
    this.st.observed++;
    // A running mean over the first groups, then an exponential average over `horizon` groups.
    const a = 1 / Math.min(this.st.observed, this.horizon);
    this.st.share_easy += a * ((kind === 'easy' ? 1 : 0) - this.st.share_easy);
    this.st.share_hard += a * ((kind === 'hard' ? 1 : 0) - this.st.share_hard);
    if (!this.enabled) return;
    const uniform = 1 - this.cfg.target_informative;
    const step = this.step;
    // Too many uniform groups of a kind: submit fewer such prompts (lower keep), else more.
    this.st.keep_hard = clamp(this.st.keep_hard + (this.st.share_hard >= (2 * uniform) / 3 ? -step : step));
    this.st.keep_easy = clamp(this.st.keep_easy + (this.st.share_easy >= uniform / 3 ? -step : step));
  }
}

function clamp(x: number): number {
  return Math.min(KEEP_MAX, Math.max(KEEP_MIN, x));
}
