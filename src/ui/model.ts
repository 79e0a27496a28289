/**
 * The JSON the browser pages read (`/ui/api/*` of `raas serve` and of `raas view`). Types only: the
 * server code builds these and the pages (src/ui/web, checked JavaScript) import them for their
 * JSDoc. They are the console's own shapes, not the stable API (docs/api.md has that).
 */
import type { BackendInfo } from '../protocol/llm.js';
import type { TenantStatus } from '../protocol/status.js';
import type { JobState } from '../protocol/process.js';

/** What a page asks first: which server it talks to. */
export interface UiInfo {
  mode: 'server' | 'run';
  version: string;
  /** `raas serve`: its URL; `raas view`: the run directory. */
  title: string;
}

/** One job as the console lists it. */
export interface JobRow {
  job_id: string;
  state: JobState;
  data_source: string;
  instance_id: string | number | null;
  group_id?: string;
  tenant?: string;
  /** Wall-clock ms: admitted, last change, ended. */
  created_at: number;
  updated_at: number;
  ended_at?: number;
  reward?: number;
  critical_error?: string | null;
  finish_reason?: string;
  num_turns?: number;
  filter?: boolean;
  error?: string | null;
  timing?: { queued_s: number; init_s: number; run_s: number; eval_s: number };
}

/** GET /ui/api/jobs: the rows that match, newest first, and counts over every kept row. */
export interface JobList {
  jobs: JobRow[];
  /** Rows that matched the filters (before `limit`). */
  matched: number;
  by_state: Partial<Record<JobState, number>>;
  data_sources: string[];
  critical_errors: string[];
}

/** One time bucket of finished jobs (for the throughput chart). */
export interface ThroughputBucket {
  /** Bucket start, wall-clock seconds. */
  t: number;
  admitted: number;
  done: number;
  failed: number;
  cancelled: number;
  timed_out: number;
  /** Mean reward of the jobs that ended `done` in the bucket (null when none). */
  mean_reward: number | null;
}

/** What the console shows of a backend: the pool's view and, when its /metrics answers, the engine's. */
export interface BackendRow extends BackendInfo {
  /** The tenant that owns it, on a server with tenants. */
  tenant?: string;
  failures: number;
  last_error: string | null;
  /** Prefix-cache hit rate over the last read interval (vLLM: Δhits/Δqueries; SGLang: its gauge); null when unknown. */
  prefix_cache_hit_rate: number | null;
  /** Since the engine started (vLLM counters); null when unknown. */
  prefix_cache_hit_rate_total: number | null;
  engine_running: number | null;
  engine_waiting: number | null;
  kv_cache_usage: number | null;
  /** Wall-clock ms of the last successful /metrics read; null before one. */
  metrics_at: number | null;
  metrics_error: string | null;
}

/** The console's live figures: sent on connect and every second on the event stream (`event: stats`). */
export interface Overview {
  status: 'running' | 'draining' | 'stopped' | 'stopping';
  version: string;
  /** Seconds since the server started. */
  uptime_s: number;
  stages: Record<'init' | 'run' | 'eval', { queued: number; busy: number; size: number }>;
  backends: BackendRow[];
  generation?: { paused: boolean; [k: string]: unknown };
  live_jobs: number;
  /** On a server with tenants: every tenant's share (the admin), or the viewer's own (a tenant). */
  tenants?: TenantStatus[];
  by_state: Partial<Record<JobState, number>>;
  throughput: { bucket_s: number; buckets: ThroughputBucket[] };
  totals: { admitted: number; done: number; failed: number; cancelled: number; timed_out: number };
  last_event_id: number;
}

/** A message of a trajectory as the pages draw it. */
export interface TurnView {
  /** Index in the trajectory (messages, then trailing messages). */
  index: number;
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  /** The `<think>` block of an assistant message, apart from its answer. */
  thinking?: string;
  tool_calls?: Array<{ name: string; arguments: unknown; id?: string }>;
  tool_call_id?: string;
  /** Ordinal of an assistant turn (0, 1, …): what weight_versions index. */
  turn?: number;
  /** Where its tokens are in the token view (`[start, end)` over prompt ++ response), when known. */
  start?: number;
  end?: number;
  /** Generated tokens of an assistant turn and their logprob statistics. */
  tokens?: number;
  logprob_mean?: number;
  logprob_min?: number;
  /** Tokens below the low-probability threshold (p < 0.1). */
  low_tokens?: number;
  weight_version?: string;
  /** Policy versions between the turn's weights and the batch's (run view, numeric versions only). */
  staleness?: number;
  /** After the last assistant message: not part of what trainers see in `messages`. */
  trailing?: boolean;
  /** Rebuilt from the decoded tokens (the rollout carried no messages). */
  from_tokens?: boolean;
}

/** One token sequence of a rollout (a result has one; an agent gateway's may have several `segments`). */
export interface TokenSequence {
  label: string;
  /** prompt_ids ++ response_ids. */
  ids: number[];
  prompt_len: number;
  /** Aligned with the response: 1 generated, 0 observation. */
  mask: number[];
  /** Aligned with the response; 0 where the mask is 0. */
  logprobs: number[];
}

/** Everything the trajectory page draws, for a job of `raas serve` or a rollout of a run. */
export interface TrajectoryView {
  job_id: string;
  state?: JobState;
  data_source?: string;
  instance_id?: string | number | null;
  group_id?: string;
  trajectory_id?: string | number | null;
  reward: number;
  resolved?: boolean;
  shaped_reward?: number;
  advantage?: number;
  finish_reason?: string;
  num_turns?: number;
  critical_error?: string | null;
  error?: string | null;
  traceback?: string;
  filter?: boolean;
  filter_reason?: string | null;
  policy_version?: number | null;
  /** Run view: the batch's policy version and the rollout's staleness. */
  batch_policy_version?: number;
  staleness?: number;
  backend?: string | null;
  weight_versions: string[];
  timing?: Record<string, number | boolean>;
  /** The grader's details (tests, the answer compared). */
  details?: Record<string, unknown>;
  git_patch?: string | null;
  turns: TurnView[];
  sequences: TokenSequence[];
  /** Text of each id in `sequences`, decoded alone by the tokenizer (`tokenizer` names it). */
  vocab: Record<string, string>;
  /** Ids the tokenizer marks as added (`<|im_start|>`, `<tool_call>`, …). */
  special: number[];
  tokenizer: string;
  /** Where the run view found it. */
  step?: number;
}

/** One step row of the run view (metrics.jsonl, else summary.json). */
export type StepRow = Record<string, unknown> & { step: number };

/** GET /ui/api/run. */
export interface RunView {
  dir: string;
  name: string;
  steps: StepRow[];
  /** summary.json without its steps (run-level figures), when written. */
  summary: Record<string, unknown> | null;
  /** Step files present (batches/step-k.json). */
  step_files: number[];
  /** True while a file of the run changed within the last minute. */
  active: boolean;
  /** Wall-clock ms of the newest change seen. */
  updated_at: number | null;
}

/** A rollout as a step's group table lists it. */
export interface RolloutRow {
  job_id: string;
  trajectory_id: string | number | null;
  reward: number | null;
  shaped_reward?: number;
  advantage?: number;
  staleness?: number;
  finish_reason?: string;
  num_turns?: number;
  response_tokens?: number;
  critical_error?: string | null;
  /** Whether it opens (its outcome and grader details; its turns and tokens when the run kept its ids). */
  openable: boolean;
}

/** A group of a step: accepted (in the batch), or filtered, dropped or cancelled (from groups.jsonl or prompts.jsonl). */
export interface GroupRow {
  group_id: string | null;
  instance_id: string | number | null;
  data_source: string;
  verdict: 'accepted' | 'filtered' | 'dropped_error' | 'dropped_stale' | 'cancelled';
  rewards: number[];
  errors?: number;
  rollouts: RolloutRow[];
}

/** GET /ui/api/run/steps/:k. */
export interface StepView {
  step: number;
  policy_version: number | null;
  stats: Record<string, unknown>;
  groups: GroupRow[];
  /** Where the non-accepted groups came from (`groups.jsonl`, `prompts.jsonl`) or null when the run has neither. */
  rejected_source: string | null;
}

/** GET /ui/api/jobs/:id: a live job has its row only; a finished one its trajectory too. */
export interface JobDetail {
  job_id: string;
  state: JobState;
  row: JobRow | null;
  trajectory: TrajectoryView | null;
}
