/**
 * The contract between the simulated backend (src/sim) and its scripted task policies
 * (src/sim/policies). The backend decodes the prompt, asks each policy in turn, and falls back to
 * seeded filler text when none recognises the instance. Policies never grade; handlers do.
 */
export interface PolicyContext {
  /** The whole prompt, decoded: special tokens kept, their text in ordinary ids broken by U+2060 (Tokenizer.decodeStructured). */
  promptText: string;
  promptIds: readonly number[];
  /** Seeded by the request's seed: a rerun of one request is identical, a group's rollouts differ. */
  rng: () => number;
  /** The backend's weight version string. */
  weightVersion: string;
  /** Number of weight updates this backend has seen; success probability rises with it. */
  updates: number;
  /** Configured rise of the success probability per update (e.g. 0.03). */
  boostPerUpdate: number;
  /**
   * The instance's success probability now, from the backend's difficulty model (src/sim/difficulty.ts):
   * `key` names the instance, `base` is its seeded Beta draw. Absent: base + boostPerUpdate × updates.
   */
  passRate?: (key: string, base: number) => number;
}

/** A scripted answer: the completion text without the end-of-turn token (the backend appends it). */
export interface PolicyTurn {
  text: string;
}

export interface SimPolicy {
  readonly name: string;
  /** A scripted turn when this policy recognises the prompt's instance, else undefined. */
  respond(ctx: PolicyContext): PolicyTurn | undefined;
}

/** Options every policy factory takes. */
export interface PolicyOptions {
  /** Seed of the per-instance Beta draws. */
  seed: number;
  /** Beta(alpha, beta) of per-instance success probability (default gives some always/never solved). */
  alpha?: number;
  beta?: number;
}
