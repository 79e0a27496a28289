import { z } from 'zod';
import { FORWARDED_SAMPLING } from './llm.js';

/** A token id: a non-negative integer. */
export const TokenId = z.number().int().nonnegative();

/**
 * Sampling parameters of one job. Known fields are typed; unknown ones are accepted on /process (ProRL
 * clients send fields we do not interpret) and reach the handler, but not the backend: only the typed
 * ones and `extra_body` are forwarded. The training config refuses unknown ones (TrainSamplingParams).
 */
export const SamplingParams = z.looseObject({
  temperature: z.number().min(0).max(100).optional(),
  top_p: z.number().gt(0).max(1).optional(),
  top_k: z.number().int().min(-1).optional(),
  seed: z.number().int().optional(),
  /** Caps one LLM call. ProRL's `max_output_tokens` is an alias. */
  max_tokens_per_turn: z.number().int().positive().optional(),
  max_output_tokens: z.number().int().positive().optional(),
  /** Caps the model-generated tokens of the whole trajectory. */
  max_response_tokens: z.number().int().positive().optional(),
  /** Context window; else the backend's /v1/models answer. */
  max_model_len: z.number().int().positive().optional(),
  max_iterations: z.number().int().positive().optional(),
  enable_thinking: z.boolean().optional(),
  stop_token_ids: z.array(TokenId).optional(),
  token_level_generation: z.boolean().optional(),
  return_message_ids: z.boolean().optional(),
  /** Ask for `messages` in DAPO batches (coordinator side). */
  return_messages: z.boolean().optional(),
  /** Forwarded to the backend (min_p, penalties, stop strings, ..., extra_body): see llm.ts. */
  ...FORWARDED_SAMPLING,
});
export type SamplingParams = z.infer<typeof SamplingParams>;

/**
 * A task instance. `data_source` picks the handler (`task` is an alias; absent means `swebench`, as
 * in ProRL); other fields are the handler's.
 */
export const Instance = z.looseObject({
  data_source: z.string().min(1).max(256).optional(),
  task: z.string().min(1).max(256).optional(),
  instance_id: z.union([z.string().max(1024), z.number()]).optional(),
  trajectory_id: z.union([z.string().max(1024), z.number()]).optional(),
});
export type Instance = z.infer<typeof Instance>;

/** The data_source ProRL assumes when an instance names none. */
export const DEFAULT_DATA_SOURCE = 'swebench';

/**
 * Job ids: any string, as in ProRL, bounded in length. The server never builds a path or a
 * command from one.
 */
export const JobId = z.string().min(1).max(256);

/** POST /process body: ProRL's `{instance, sampling_params, job_id?}` plus ours. Unknown keys are ignored, as ProRL's request model does. */
export const ProcessRequest = z
  .object({
    instance: Instance,
    sampling_params: SamplingParams.default({}),
    /** Empty or null means "none" (the server makes a UUID), as in ProRL. */
    job_id: z.string().max(256).nullish(),
    /**
     * raas's opt-in: answer from the job that already has this `job_id` (running, or finished within
     * `result_ttl_s`) instead of starting a new one. Without it every /process starts a job.
     */
    attach: z.boolean().optional(),
    timeout_s: z
      .number()
      .positive()
      .max(7 * 24 * 3600)
      .optional(),
    group_id: z.string().min(1).max(256).optional(),
    policy_version: z.number().int().nonnegative().optional(),
    /** raas: the job's priority class at every stage (higher first); default its tenant's, at most its tenant's max_priority. */
    priority: z.number().int().min(0).max(100).optional(),
  })
  .refine((r) => r.attach !== true || !!r.job_id, {
    message: 'attach: true needs a job_id to attach to: send the job_id of the job',
    path: ['attach'],
  });
export type ProcessRequest = z.infer<typeof ProcessRequest>;

/** Top-level /process keys the server reads; others are ignored (and counted). */
export const PROCESS_KEYS: ReadonlySet<string> = new Set(Object.keys(ProcessRequest.shape));

/** One tool call as ProRL reports it. */
export const ToolCall = z.object({ name: z.string(), arguments: z.record(z.string(), z.unknown()), id: z.string().optional() });
export type ToolCall = z.infer<typeof ToolCall>;

/** One message of a trajectory. */
export const Message = z.object({
  role: z.enum(['system', 'user', 'assistant', 'tool']),
  content: z.string(),
  tool_calls: z.array(ToolCall).optional(),
  token_ids: z.array(TokenId).optional(),
  input_ids: z.array(TokenId).optional(),
  logprobs: z.array(z.number()).optional(),
  tool_call_id: z.string().optional(),
});
export type Message = z.infer<typeof Message>;

/** Maps a message after the prompt onto `response_ids[start, end)`. */
export const Span = z.object({
  message_index: z.number().int().nonnegative(),
  start: z.number().int().nonnegative(),
  end: z.number().int().nonnegative(),
});
export type Span = z.infer<typeof Span>;

/** The training view: `prompt_ids ++ response_ids` is the whole sequence. */
export const Tokens = z.object({
  prompt_ids: z.array(TokenId),
  response_ids: z.array(TokenId),
  /** 1 on model-generated ids, 0 on observation ids. */
  response_mask: z.array(z.union([z.literal(0), z.literal(1)])),
  /** Aligned with response_ids; 0 where the mask is 0. */
  logprobs: z.array(z.number()),
  spans: z.array(Span).optional(),
});
export type Tokens = z.infer<typeof Tokens>;

/**
 * One sequence of a rollout that holds several (an agent harness behind the gateway: a rewritten
 * history, a sub-agent, a retried call). `prompt_ids ++ response_ids` is exactly what the backend
 * saw on the segment's last call; `parent` names the segment it branched from and how many leading
 * ids they share (those ids are in this segment's prompt_ids, trained on in the parent).
 */
export const Segment = Tokens.extend({
  index: z.number().int().nonnegative(),
  parent: z.object({ segment: z.number().int().nonnegative(), shared: z.number().int().nonnegative() }).nullable(),
  /** Model turns generated in this segment. */
  num_turns: z.number().int().nonnegative(),
  /** Per model turn, the weight version it started under. */
  weight_versions: z.array(z.string()),
});
export type Segment = z.infer<typeof Segment>;

export const FINISH_REASONS = [
  'finish',
  'max_iterations',
  'max_response_tokens',
  'max_model_len',
  'error',
  'timeout',
  'cancelled',
] as const;
export const FinishReason = z.enum(FINISH_REASONS);
export type FinishReason = z.infer<typeof FinishReason>;

export const CriticalError = z.enum(['init', 'run', 'eval', 'timeout', 'cancelled']).nullable();
export type CriticalError = z.infer<typeof CriticalError>;

export const Timing = z.object({
  // ProRL's keys (its PausableTimer): seconds in each stage, outside them, and counted toward the timeout.
  init_time: z.number(),
  run_time: z.number(),
  eval_time: z.number(),
  others_time: z.number(),
  counted_elapsed: z.number(),
  timeout_triggered: z.boolean(),
  // ours: the same seconds under raas's names (queued_s is ProRL's others_time)
  queued_s: z.number(),
  init_s: z.number(),
  run_s: z.number(),
  eval_s: z.number(),
  counted_s: z.number(),
});
export type Timing = z.infer<typeof Timing>;

/** A turn's record: which backend answered and with which weights. */
export const TurnRecord = z.object({ backend: z.string(), weight_version: z.string() });

/**
 * The result of one job: ProRL's keys (read by its clients) plus ours. Always answered with 200
 * once the job ended; failure is data (`critical_error`).
 */
export const Result = z.looseObject({
  // ProRL's keys
  instance_id: z.union([z.string(), z.number()]).nullable(),
  trajectory_id: z.union([z.string(), z.number()]).nullable(),
  git_patch: z.string().nullable(),
  success: z.boolean(),
  finish: z.boolean(),
  messages: z.array(Message),
  tools: z.array(z.unknown()),
  end_properly: z.boolean(),
  resolved: z.boolean(),
  critical_error: CriticalError,
  filter: z.boolean(),
  /** Why `filter` is true (null when it is false): a critical error, `not_finished`, or the handler's reason. */
  filter_reason: z.string().nullable().optional(),
  error: z.string().nullable(),
  /** The stack of the exception that failed a stage (with critical_error init, run or eval). */
  traceback: z.string().optional(),
  // ours
  /** Messages after the last assistant message, trimmed from `messages` as ProRL trims them; `messages ++ trailing_messages` is what `tokens.spans` index. */
  trailing_messages: z.array(Message).optional(),
  job_id: z.string(),
  data_source: z.string(),
  reward: z.number(),
  finish_reason: FinishReason,
  backend: z.string().nullable(),
  policy_version: z.number().int().nullable(),
  weight_versions: z.array(z.string()),
  num_turns: z.number().int().nonnegative(),
  timing: Timing,
  tokens: Tokens,
  /** Every sequence of a rollout that has several (harness jobs); `tokens` is then the one with the most generated ids. */
  segments: z.array(Segment).optional(),
});
export type Result = z.infer<typeof Result>;

/** POST /cancel body (unknown keys ignored, as in ProRL). */
export const CancelRequest = z.object({
  job_id: z.string().max(256),
  /** raas, admin token of a multi-tenant server: only this tenant's jobs (default: every tenant's). */
  tenant: z.string().min(1).max(64).optional(),
});
export const CancelResponse = z.object({ status: z.string(), job_id: z.string(), cancelled: z.boolean(), state: z.string() });
export type CancelResponse = z.infer<typeof CancelResponse>;

export const JOB_STATES = [
  'queued_init',
  'init',
  'queued_run',
  'run',
  'queued_eval',
  'eval',
  'done',
  'failed',
  'cancelled',
  'timed_out',
] as const;
export const JobState = z.enum(JOB_STATES);
export type JobState = z.infer<typeof JobState>;
export const TERMINAL_STATES: ReadonlySet<JobState> = new Set(['done', 'failed', 'cancelled', 'timed_out']);

/** GET /jobs/:id answer. */
export const JobResponse = z.object({ job_id: z.string(), state: JobState, result: Result.optional() });
export type JobResponse = z.infer<typeof JobResponse>;
