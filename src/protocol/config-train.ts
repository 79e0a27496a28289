import { z } from 'zod';
import { SamplingParams } from './process.js';
import { BackendAddress, LlmApi } from './llm.js';

/** A rollout server the coordinator talks to (when not embedded). */
export const ServerRef = z.strictObject({
  url: z.string().url(),
  token: z.string().optional(),
  /** A file holding the server's token (relative to the config file's folder), chmod 600. */
  token_file: z.string().min(1).optional(),
  /** The name of an environment variable holding the server's token. */
  token_env: z.string().min(1).optional(),
});
export type ServerRef = z.infer<typeof ServerRef>;

/**
 * A registry the coordinator reads its rollout servers from (`servers: {registry: url}`): any
 * `raas serve` other servers joined with `--join`. Servers that join mid-run get backends placed
 * onto them and work at the next admission; one that misses its heartbeats is handled as a dead
 * server; one that drains gets no new groups. The token reaches the registry and the servers.
 */
export const RegistryRef = z.strictObject({
  registry: z.string().url(),
  token: z.string().optional(),
  token_file: z.string().min(1).optional(),
  token_env: z.string().min(1).optional(),
  /** How often the node list is read. */
  poll_interval_ms: z.number().int().positive().default(2000),
});
export type RegistryRef = z.infer<typeof RegistryRef>;

/** An LLM inference server (vLLM or SGLang) placed onto the rollout servers. */
export const BackendRef = z.union([BackendAddress, z.strictObject({ address: BackendAddress, api: LlmApi.optional() })]);
export type BackendRef = z.infer<typeof BackendRef>;

/** The prompts: JSONL (one instance per line) or Parquet in veRL's row format. */
export const DatasetConfig = z.strictObject({
  path: z.string().min(1),
  /** Inferred from the extension when absent. */
  format: z.enum(['jsonl', 'parquet']).optional(),
  shuffle: z.boolean().default(true),
  /** Passes over the data (a skipped prompt counts as visited); absent (the default) means unlimited. */
  epochs: z.number().int().positive().optional(),
  /** Overrides each row's data_source (veRL rows name the original dataset, e.g. openai/gsm8k). */
  data_source: z.string().min(1).optional(),
  /** Use only the first `limit` rows (before shuffling). */
  limit: z.number().int().positive().optional(),
});
export type DatasetConfig = z.infer<typeof DatasetConfig>;

/** DAPO overlong reward shaping on the number of model-generated tokens. */
export const OverlongConfig = z.strictObject({
  enabled: z.boolean().default(false),
  /** L_max: the response length budget. */
  max_tokens: z.number().int().positive().default(4096),
  /** L_cache: the soft-penalty interval below L_max. */
  buffer: z.number().int().nonnegative().default(512),
  penalty_factor: z.number().nonnegative().default(1),
});
export type OverlongConfig = z.infer<typeof OverlongConfig>;

/** What runs once per step on the step's batch file (`raas train`). */
const TrainerConfig = z.strictObject({
  /** Shell command; `{batch_path}`, `{step}` and `{run_dir}` are substituted. */
  command: z.string().min(1).optional(),
  cwd: z.string().optional(),
  env: z.record(z.string(), z.string()).default({}),
  /** Without a command: call updateWeights after each step (and bump the embedded simulators). */
  update_weights: z.boolean().default(true),
});

/** Simulated backends started by `embedded: true` (options of startSim). */
export const EmbeddedConfig = z.strictObject({
  servers: z.number().int().positive().default(1),
  backends: z.number().int().positive().default(2),
  api: LlmApi.default('vllm'),
  /** Options passed to each startSim (latency, filler, boost_per_update, datasets...). */
  sim: z.record(z.string(), z.unknown()).default({}),
  /** Partial ServerConfig passed to each startRolloutServer. */
  server: z.record(z.string(), z.unknown()).default({}),
});
export type EmbeddedConfig = z.infer<typeof EmbeddedConfig>;

/** `raas eval`: one pass, n rollouts per prompt, no filtering, no weight updates. */
const EvalConfig = z.strictObject({
  dataset: DatasetConfig.optional(),
  n: z.number().int().positive().optional(),
  output: z.string().optional(),
});

/** Overrides applied by `raas train --smoke` (CI). */
const SmokeConfig = z.strictObject({
  steps: z.number().int().positive().default(2),
  batch_size: z.number().int().positive().optional(),
  n: z.number().int().positive().optional(),
});

/**
 * Adaptive group size: each prompt's n from the posterior of its pass rate, within [min, max]
 * (docs/training.md#adaptive-group-size). `batch: variable` hands every rollout over (groups of
 * different sizes); `batch: fixed` keeps `n` rollouts per group in the batch, for trainers whose
 * batch bookkeeping counts batch_size × n rows.
 */
export const AdaptiveNConfig = z.strictObject({
  /** Smallest group (`variable`; a `fixed` batch's groups start at n). */
  min: z.number().int().min(2).default(2),
  max: z.number().int().min(2),
  batch: z.enum(['variable', 'fixed']).default('variable'),
  /**
   * fixed: the group size is grown from n until the posterior chance that the group is mixed
   * reaches this (a prompt that even `max` rollouts would not mix keeps n).
   */
  target_mixed: z.number().gt(0).lt(1).default(0.5),
});
export type AdaptiveNConfig = z.infer<typeof AdaptiveNConfig>;

/**
 * Pre-rollout prompt selection from each prompt's history (docs/training.md#prompt-selection).
 * `none` (default) submits every prompt the dataset yields; `history` skips a prompt whose recent
 * groups all had equal rewards with a probability adapted to keep `target_informative`, never
 * below the `explore` floor of submitting it.
 */
export const SelectionConfig = z.strictObject({
  mode: z.enum(['none', 'history']).default('none'),
  /** Share of finished groups that should be informative; the skip probabilities adapt toward it. */
  target_informative: z.number().gt(0).lt(1).default(0.75),
  /** Floor of the probability that a prompt whose recent groups were all equal is submitted. */
  explore: z.number().gt(0).max(1).default(0.05),
  /** A prompt skipped this many times in a row is submitted on its next turn (no prompt starves). */
  max_skips: z.number().int().nonnegative().default(40),
  /** Evidence from older policies counts less: a group's weight halves every this many versions; null: never. */
  half_life_versions: z.number().positive().nullable().default(100),
  /** Keep base of a prompt with one all-equal group at the start (GRESO's initial p). */
  initial_keep: z.number().gt(0).lt(1).default(0.5),
  /** How far the keep bases move (toward target_informative) per batch_size finished groups: GRESO's 0.01 per step. */
  adapt_step: z.number().positive().max(0.5).default(0.01),
  /** Opt-in adaptive group size. */
  adaptive_n: AdaptiveNConfig.optional(),
});
export type SelectionConfig = z.infer<typeof SelectionConfig>;

/** The training config (`raas train x.yaml`, `new Coordinator(config)`). Every field but dataset is defaulted. */
export const TrainConfig = z.strictObject({
  name: z
    .string()
    .regex(/^[A-Za-z0-9._-]+$/, 'letters, digits, ".", "_" or "-"')
    .default('run'),
  seed: z.number().int().default(0),
  /** Start a local rollout server and simulated backends (true, or their options). */
  embedded: z.union([z.boolean(), EmbeddedConfig]).default(false),
  /** The rollout servers: a list, or a registry they joined (`{registry: url}`). */
  servers: z.union([z.array(ServerRef), RegistryRef]).default([]),
  backends: z.array(BackendRef).default([]),
  /**
   * Which logprobs the backends return (vLLM `--logprobs-mode`), recorded in every batch so the
   * trainer can check it. Embedded simulators: theirs (`embedded.sim.logprobs_mode`, default
   * raw_logprobs); external backends: unknown unless declared here.
   */
  logprobs_mode: z.enum(['raw_logprobs', 'processed_logprobs']).optional(),
  dataset: DatasetConfig,
  mode: z.enum(['async', 'sync']).default('async'),
  carry_over: z.boolean().default(true),
  /**
   * Async only: hand over the earliest accepted groups only once every group submitted before them
   * has finished, so a batch never depends on finish order (reproducible batches with a seed, at
   * the cost of waiting for stragglers). Default false: a batch as soon as batch_size are accepted.
   */
  ordered_handover: z.boolean().default(false),
  max_staleness: z.number().int().nonnegative().default(1),
  n: z.number().int().positive().default(8),
  batch_size: z.number().int().positive().default(32),
  /** Default: the sum of the fleet's workers.run.size (read from /status at start). */
  max_inflight_jobs: z.number().int().positive().optional(),
  /**
   * Prompts ahead of admission the servers are told about (POST /prefetch), so the images their
   * sandboxes need are unpacked before their groups start. Default: batch_size; 0 turns it off.
   */
  prefetch_ahead: z.number().int().nonnegative().optional(),
  on_error: z.enum(['drop_group', 'zero_reward']).default('drop_group'),
  steps: z.number().int().positive().default(10),
  /** Strict here (unlike /process): a misspelt key fails the config; other backend fields go in `extra_body`. */
  sampling_params: SamplingParams.strict().default({}),
  timeout_s: z.number().positive().optional(),
  overlong: OverlongConfig.default(OverlongConfig.parse({})),
  return_messages: z.boolean().default(false),
  trainer: TrainerConfig.default(TrainerConfig.parse({})),
  output_dir: z.string().default('runs'),
  /**
   * `runs/<name>/groups.jsonl`: one line per group that did not reach a batch (filtered, dropped,
   * cancelled), for `raas view`. `summary`: each rollout's reward, finish, error and grader details;
   * `full`: also its token ids (and messages with return_messages), so any rollout opens; `off`: none.
   */
  groups_log: z.enum(['off', 'summary', 'full']).default('summary'),
  smoke: SmokeConfig.default(SmokeConfig.parse({})),
  eval: EvalConfig.default({}),
  health_interval_ms: z.number().int().positive().optional(),
  /** Pre-rollout prompt selection and adaptive group size (default: none, every prompt submitted with n rollouts). */
  selection: SelectionConfig.default(SelectionConfig.parse({})),
  /**
   * A step that finished this many groups without batch_size informative ones ends with the error
   * `no_informative_groups` (a warning at a third of it). Default 30 × batch_size (veRL's DAPO
   * recipe: 10 generation batches of 3 × train_batch_size prompts); 0: no limit.
   */
  max_groups_per_step: z.number().int().nonnegative().optional(),
  /** How backends are re-registered at each weight update: `sync` (add/update, then remove others) or `replace` (clear + add). */
  placement_mode: z.enum(['sync', 'replace']).default('sync'),
});
export type TrainConfig = z.infer<typeof TrainConfig>;
/** What a user writes: every defaulted key optional. */
export type TrainConfigInput = z.input<typeof TrainConfig>;
