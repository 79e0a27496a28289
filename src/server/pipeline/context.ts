import type { Tokenizer } from '../../tokens/tokenizer.js';
import type { EvalContext, InitResult, Logger, RunContext, RunResult, StageContext } from '../handlers/types.js';
import type { LlmSession } from '../llm/types.js';
import type { Sandbox } from '../sandbox/types.js';
import type { Job } from './job.js';
import { StageSandboxes, type LazySandboxRuntime } from './sandboxes.js';

/** What every stage's context is built from. */
export interface ContextDeps {
  config: Record<string, unknown>;
  log: Logger;
  sandboxes: LazySandboxRuntime;
  tokenizer: () => Tokenizer;
}

/**
 * What a handler's INIT gets as `ctx`, and the base of RUN's and EVAL's: `tokenizer` is read
 * lazily (loading Qwen3 takes about a second and a sandbox-less stage may never read it), the
 * sandbox opener is made on first read, and `job` is the job's info, built once per job.
 */
export class StageCtx implements StageContext<unknown> {
  readonly job: Job['info'];
  readonly config: Record<string, unknown>;
  readonly log: Logger;
  readonly #job: Job;
  readonly #deps: ContextDeps;
  #sandboxes: StageSandboxes | undefined;
  #ended = false;

  constructor(job: Job, deps: ContextDeps) {
    this.#job = job;
    this.#deps = deps;
    this.job = job.info;
    this.config = deps.config;
    this.log = deps.log;
  }
  get signal(): AbortSignal {
    return this.#job.signal;
  }
  get tokenizer(): Tokenizer {
    return this.#deps.tokenizer();
  }
  /** The stage's sandbox opener, made on first read (a stage that opens nothing makes none). */
  get sandboxes(): StageSandboxes {
    if (!this.#sandboxes) {
      this.#sandboxes = new StageSandboxes(this.#deps.sandboxes, this.#job);
      if (this.#ended) this.#sandboxes.end();
    }
    return this.#sandboxes;
  }
  /** The stage ended: its opener (if one was made), for closing what it opened. */
  endSandboxes(): StageSandboxes | undefined {
    this.#ended = true;
    return this.#sandboxes;
  }
}

/**
 * RUN's context: the runtime INIT returned, INIT's result and the job's LLM session. The session
 * (and with it the job's backend) is opened on first read of `llm`: a handler that never calls a
 * model binds no backend and costs no session.
 */
export class RunCtx extends StageCtx implements RunContext<unknown> {
  readonly #openLlm: () => LlmSession;
  #llm: LlmSession | undefined;

  constructor(
    job: Job,
    deps: ContextDeps,
    readonly runtime: Sandbox | undefined,
    readonly init: InitResult,
    openLlm: () => LlmSession,
  ) {
    super(job, deps);
    this.#openLlm = openLlm;
  }
  get llm(): LlmSession {
    return (this.#llm ??= this.#openLlm());
  }
}

/** EVAL's context: RUN's result (the fallback when RUN failed). */
export class EvalCtx extends StageCtx implements EvalContext<unknown> {
  constructor(
    job: Job,
    deps: ContextDeps,
    readonly run: RunResult,
  ) {
    super(job, deps);
  }
}
