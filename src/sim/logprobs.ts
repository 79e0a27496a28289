/**
 * Raw and processed logprobs of the simulated backend, as vLLM's `--logprobs-mode` selects them.
 *
 * vLLM (`vllm/v1/sample/sampler.py`, `ops/topk_topp_sampler.py`) reports `raw_logprobs` as
 * `log_softmax(logits)` before any sampling step, and `processed_logprobs` as
 * `log_softmax(top_k_top_p(logits / temperature))`: the distribution the token was drawn from,
 * which is what trainers recompute (veRL and NeMo RL divide their logits by the temperature).
 *
 * The simulator has no logits, so each position gets a small model distribution: the sampled
 * token with raw probability p = e^a (a is the raw logprob the engine draws) and `m` equal "tail"
 * tokens sharing 1 − p, with the least `m` that keeps each tail token below p. The sampled token
 * is then the mode, so it always survives top-k and top-p, as a token vLLM sampled must.
 */

/** The values of vLLM's `--logprobs-mode` the simulator implements (vLLM's default is raw). */
export const LOGPROBS_MODES = ['raw_logprobs', 'processed_logprobs'] as const;
/** One of `LOGPROBS_MODES`. */
export type LogprobsMode = (typeof LOGPROBS_MODES)[number];

/** The sampling parameters that change processed logprobs. */
export interface SamplingView {
  temperature?: number;
  top_p?: number;
  top_k?: number;
}

/** What the backend reports at one position. */
export interface PositionLogprobs {
  /** The sampled token's logprob in the chosen mode. */
  logprob: number;
  /** Each tail token's logprob (−Infinity when filtered out or when there is no tail mass). */
  tailLogprob: number;
  /** Tail tokens left after top-k/top-p (all of them in raw mode). */
  tailCount: number;
}

// vLLM's sampler treats temperatures below this as greedy (no temperature, no top-k/top-p).
const SAMPLING_EPS = 1e-5;

/** The tail of the model distribution around a sampled token of raw logprob `a`. */
function tailOf(a: number): { count: number; logprob: number } {
  const p = Math.exp(a);
  // floor + 1 keeps each tail token strictly below p (no tie with the sampled token).
  const count = Math.floor((1 - p) / p) + 1;
  return { count, logprob: Math.log1p(-p) - Math.log(count) };
}

/** The logprobs one position reports under `mode` with the request's sampling parameters. */
export function positionLogprobs(a: number, mode: LogprobsMode, s: SamplingView): PositionLogprobs {
  const tail = tailOf(a);
  const T = s.temperature ?? 1;
  if (mode === 'raw_logprobs' || T < SAMPLING_EPS) {
    // Greedy requests leave vLLM's sampler before temperature and filters: processed = raw here.
    return { logprob: a, tailLogprob: tail.logprob, tailCount: tail.count };
  }
  const ys = a / T;
  const yt = tail.logprob / T;
  let kept = tail.count;
  // top-k first (vLLM's apply_top_k_top_p_pytorch masks logits below the k-th largest, so ties with it
  // stay): k = 1 keeps the sampled token alone; any larger k keeps the whole equal tail.
  if (s.top_k === 1) kept = 0;
  // top-p: sorted ascending, a token is masked while the cumulative probability is ≤ 1 − top_p;
  // the largest (the sampled token) never is.
  if (s.top_p !== undefined && s.top_p < 1 && kept > 0) {
    const qt = Math.exp(yt - logAddExp(ys, Math.log(kept) + yt));
    if (qt > 0) kept -= Math.min(kept, Math.floor(((1 - s.top_p) / qt) * (1 + 1e-12)));
  }
  const z = kept > 0 ? logAddExp(ys, Math.log(kept) + yt) : ys;
  return { logprob: ys - z, tailLogprob: kept > 0 ? yt - z : -Infinity, tailCount: kept };
}

/** A logprob as the wire carries it: vLLM's −9999 clamp, 6 decimals, never −0. */
export function wireLogprob(x: number): number {
  return Math.max(-9999, Math.round(x * 1e6) / 1e6) || 0;
}

function logAddExp(x: number, y: number): number {
  if (x === -Infinity) return y;
  if (y === -Infinity) return x;
  const m = Math.max(x, y);
  return m + Math.log(Math.exp(x - m) + Math.exp(y - m));
}
