import type { OverlongConfig } from '../protocol/config-train.js';

/** The epsilon veRL adds to the group's standard deviation. */
export const ADVANTAGE_EPS = 1e-6;

/**
 * DAPO overlong shaping: 0 up to L_max − L_cache model-generated tokens, then a linear penalty
 * reaching −penalty_factor at L_max, and −penalty_factor beyond it.
 */
export function overlongPenalty(
  generated: number,
  cfg: Pick<OverlongConfig, 'enabled' | 'max_tokens' | 'buffer' | 'penalty_factor'>,
): number {
  if (!cfg.enabled) return 0;
  const expected = cfg.max_tokens - cfg.buffer;
  if (generated <= expected) return 0;
  if (generated > cfg.max_tokens || cfg.buffer === 0) return -cfg.penalty_factor;
  return ((expected - generated) / cfg.buffer) * cfg.penalty_factor;
}

/** reward + overlong penalty; equals `reward` without shaping. */
export function shapedReward(reward: number, generated: number, cfg: OverlongConfig): number {
  return reward + overlongPenalty(generated, cfg);
}

/**
 * Group-relative advantages `(r − mean) / (std + 1e-6)` with the sample standard deviation, as veRL
 * computes them (GRPO outcome advantage). A group of one has mean 0 and std 1, as in veRL.
 */
export function groupAdvantages(rewards: readonly number[]): number[] {
  const n = rewards.length;
  if (n === 0) return [];
  if (n === 1) return [rewards[0] / (1 + ADVANTAGE_EPS)];
  const mean = rewards.reduce((a, b) => a + b, 0) / n;
  const variance = rewards.reduce((a, r) => a + (r - mean) ** 2, 0) / (n - 1);
  const std = Math.sqrt(variance);
  return rewards.map((r) => (r - mean) / (std + ADVANTAGE_EPS));
}

/** Number of model-generated tokens of a rollout (mask 1). */
export function generatedTokens(mask: readonly number[]): number {
  let s = 0;
  for (const m of mask) s += m;
  return s;
}

/** Acceptance: an informative group's task rewards (before shaping) are not all equal. */
export function isInformative(rewards: readonly number[]): boolean {
  return rewards.some((r) => r !== rewards[0]);
}
