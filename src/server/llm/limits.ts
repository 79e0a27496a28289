import type { FinishReason, SamplingParams } from '../../protocol/process.js';

/** The length limits of one job (docs/agent.md). */
export interface LengthLimits {
  /** Caps one call (`max_tokens_per_turn`, alias `max_output_tokens`). */
  perTurn: number;
  /** Caps the model-generated tokens of the whole trajectory. */
  response: number;
}

/** Reads the limits from sampling params, with a handler's defaults where they are silent. */
export function lengthLimits(
  sp: SamplingParams,
  defaults: { max_tokens_per_turn?: number; max_response_tokens?: number } = {},
): LengthLimits {
  return {
    perTurn: sp.max_tokens_per_turn ?? sp.max_output_tokens ?? defaults.max_tokens_per_turn ?? 1024,
    response: sp.max_response_tokens ?? defaults.max_response_tokens ?? Number.POSITIVE_INFINITY,
  };
}

/**
 * max_tokens for the next call, or the normal finish that applies when nothing is left:
 * `max_response_tokens` when the trajectory's budget is spent, `max_model_len` when the context is full.
 */
export function nextMaxTokens(
  limits: LengthLimits,
  generated: number,
  promptLen: number,
  maxModelLen: number | undefined,
): { max_tokens: number; cause: 'per_turn' | 'response' | 'model_len' } | { finish: FinishReason } {
  const responseLeft = limits.response - generated;
  if (responseLeft <= 0) return { finish: 'max_response_tokens' };
  const contextLeft = maxModelLen === undefined ? Number.POSITIVE_INFINITY : maxModelLen - promptLen;
  if (contextLeft <= 0) return { finish: 'max_model_len' };
  const max = Math.min(limits.perTurn, responseLeft, contextLeft);
  const cause =
    max === contextLeft && contextLeft < Math.min(limits.perTurn, responseLeft)
      ? 'model_len'
      : max === responseLeft && responseLeft < limits.perTurn
        ? 'response'
        : 'per_turn';
  return { max_tokens: max, cause };
}
