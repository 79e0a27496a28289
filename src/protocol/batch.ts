import { z } from 'zod';
import { CriticalError, FinishReason, Message, Segment, Tokens } from './process.js';

/** One rollout of a group, as a trainer consumes it. */
export const Rollout = z.object({
  job_id: z.string(),
  trajectory_id: z.union([z.string(), z.number()]).nullable(),
  reward: z.number(),
  shaped_reward: z.number(),
  advantage: z.number(),
  /** Policy version the rollout was submitted under. */
  policy_version: z.number().int(),
  /** Policy version at handover minus policy_version. */
  staleness: z.number().int().nonnegative(),
  weight_versions: z.array(z.string()),
  finish_reason: FinishReason,
  num_turns: z.number().int().nonnegative(),
  tokens: Tokens,
  /**
   * A rollout of several sequences (an agent harness whose history was rewritten, or that ran a
   * sub-agent): every one, each trained with the rollout's reward and advantage. Absent for a
   * rollout of one sequence, which is `tokens` alone.
   */
  segments: z.array(Segment).optional(),
  messages: z.array(Message).optional(),
  /** The grader's details (tests passed and failed, the answer compared), when it gave some. */
  details: z.record(z.string(), z.unknown()).optional(),
  /** A failed rollout (kept with reward 0 under on_error: zero_reward): the stage that failed and its error. */
  critical_error: CriticalError.optional(),
  error: z.string().nullable().optional(),
});
export type Rollout = z.infer<typeof Rollout>;

/** A prompt's n rollouts: the unit of submission and acceptance. */
export const Group = z.object({
  group_id: z.string(),
  instance_id: z.union([z.string(), z.number()]).nullable(),
  data_source: z.string(),
  rollouts: z.array(Rollout),
});
export type Group = z.infer<typeof Group>;

export const BatchStats = z.looseObject({
  submitted: z.number().int(),
  completed: z.number().int(),
  accepted: z.number().int(),
  filtered: z.number().int(),
  cancelled: z.number().int(),
  carried_over: z.number().int(),
  errors: z.number().int(),
  dropped_stale: z.number().int(),
  /** staleness value (as a string key) → number of rollouts. */
  staleness_histogram: z.record(z.string(), z.number().int()),
  wall_s: z.number(),
  worker_utilization: z.number(),
  tokens_generated: z.number().int(),
  tokens_used: z.number().int(),
});
export type BatchStats = z.infer<typeof BatchStats>;

/** One training step's batch. The sidecar, batch files, the Node API and the Python bridge carry this one shape. */
export const Batch = z.object({
  step: z.number().int().nonnegative(),
  policy_version: z.number().int().nonnegative(),
  groups: z.array(Group),
  stats: BatchStats,
  /** Which logprobs the backends returned (vLLM's `--logprobs-mode`); absent when unknown. */
  logprobs_mode: z.enum(['raw_logprobs', 'processed_logprobs']).optional(),
});
export type Batch = z.infer<typeof Batch>;

/** `updateWeights` arguments, everywhere (Node API, sidecar, a trainer command's last stdout line). */
export const UpdateWeightsRequest = z.strictObject({
  version: z.number().int().nonnegative().optional(),
  weight_version: z.string().max(256).optional(),
  backends: z
    .array(z.union([z.string().min(1), z.strictObject({ address: z.string().min(1), api: z.enum(['vllm', 'sglang']).optional() })]))
    .optional(),
});
export type UpdateWeightsRequest = z.infer<typeof UpdateWeightsRequest>;
