import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { Message, Result, SamplingParams, Tokens, FinishReason } from '../../protocol/process.js';
import type { Sandbox, SandboxSpec } from '../sandbox/types.js';
import type { LlmSession } from '../llm/types.js';
import type { Tokenizer } from '../../tokens/tokenizer.js';

export type { Logger } from '../../util/logger.js';
import type { Logger } from '../../util/logger.js';

/** The job as a handler sees it. */
export interface JobInfo<I> {
  id: string;
  instance: I;
  samplingParams: SamplingParams;
  groupId: string | undefined;
  policyVersion: number | undefined;
  /** The job's seed: hash of (sampling_params.seed, job_id) when the request gives a seed, else fresh for every job. */
  seed: number;
}

/** Opens sandboxes; the pipeline closes every sandbox a stage opened when that stage ends. */
export interface SandboxOpener {
  open(spec: SandboxSpec, signal?: AbortSignal): Promise<Sandbox>;
}

export interface StageContext<I> {
  job: JobInfo<I>;
  /** Aborts on cancel or timeout; pass it to every async call. */
  signal: AbortSignal;
  /** The handler's section of the server config (`handlers.<name>`), or {}. */
  config: Record<string, unknown>;
  log: Logger;
  sandboxes: SandboxOpener;
  tokenizer: Tokenizer;
}

export interface InitResult {
  /** The sandbox RUN uses; the pipeline closes it right after RUN, before EVAL. */
  runtime?: Sandbox;
  metadata?: Record<string, unknown>;
}

export interface RunContext<I> extends StageContext<I> {
  runtime: Sandbox | undefined;
  init: InitResult;
  /** Bound to the job's backend and seed. */
  llm: LlmSession;
}

export interface RunResult {
  messages: Message[];
  tokens: Tokens;
  finish_reason: FinishReason;
  /** The final answer, `git_patch`, files: whatever EVAL needs. */
  artifacts: Record<string, unknown>;
  num_turns?: number;
  tools?: unknown[];
}

export interface EvalResult {
  reward: number;
  resolved: boolean;
  details?: Record<string, unknown>;
  /**
   * Why this reward is unreliable (a grader run that timed out, tampering seen, …): the result gets
   * `filter: true` and this as `filter_reason`, whatever ProRL's rule says.
   */
  filter_reason?: string;
}

export interface EvalContext<I> extends StageContext<I> {
  run: RunResult;
}

/** What admission knows of the server, for instance checks that need it (AgentHandler.checkInstance). */
export interface AdmissionEnv {
  /** Host directories client-named files may come from (`sandbox.data_dirs`). */
  dataDirs: readonly string[];
  /** Largest client-named host file a handler may read, in bytes (`sandbox.disk_mb`). */
  maxFileBytes: number;
}

/** The handler contract (docs/tasks.md, "Writing a handler"). A handler module's default export is one or an array. */
export interface AgentHandler<I = Record<string, unknown>> {
  name: string;
  aliases?: string[];
  /** Validates the instance at /process, before any sandbox starts (zod 4 schemas are Standard Schemas). */
  instance: StandardSchemaV1<unknown, I>;
  /**
   * Checks a validated instance against the server at /process, before any sandbox starts (e.g. a
   * host path against sandbox.data_dirs); returns the instance to run, or nothing to keep it. A
   * RaasError('invalid_instance') answers 400.
   */
  checkInstance?(instance: I, env: AdmissionEnv): I | void | Promise<I | void>;
  /**
   * The images an instance's sandboxes will be rooted in (SandboxSpec.rootImage refs), so the
   * server unpacks them ahead of the job (POST /prefetch). `config` is the handler's section of the
   * server config. Nothing, or a throw, means nothing to prepare.
   */
  prefetch?(instance: I, config: Record<string, unknown>): string[];
  init(ctx: StageContext<I>): Promise<InitResult>;
  run(ctx: RunContext<I>): Promise<RunResult>;
  eval(ctx: EvalContext<I>): Promise<EvalResult>;
  initException?(ctx: StageContext<I>, err: unknown): Partial<Result>;
  runException?(ctx: RunContext<I>, err: unknown): Partial<Result>;
  evalException?(ctx: EvalContext<I>, err: unknown): Partial<Result>;
  finalResult?(ctx: EvalContext<I>): Partial<Result>;
}
