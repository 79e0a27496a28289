import { cancellationKind } from '../../protocol/errors.js';
import type { JobState, Result } from '../../protocol/process.js';
import type { Tokenizer } from '../../tokens/tokenizer.js';
import type { EvalResult, InitResult, Logger, RunResult, StageContext } from '../handlers/types.js';
import { JobLlmSession } from '../llm/session.js';
import { transition, type Job, type Stage } from './job.js';
import type { PipelineOptions } from './pipeline.js';
import { fallbackRun } from './result.js';
import { StageSandboxes, type LazySandboxRuntime } from './sandboxes.js';

export interface StageRunnerOptions extends PipelineOptions {
  sandboxes: LazySandboxRuntime;
  /** Enqueue the job for a stage. */
  next(job: Job, stage: Stage): void;
  finish(job: Job, state: JobState, evalResult?: EvalResult): void;
  /** Background work stop() must wait for (sandbox closes of abandoned stages). */
  track(p: Promise<unknown>): void;
}

/** Marks a stage the pipeline stopped waiting for (the handler ignored its signal past the grace). */
const ABANDONED = Symbol('abandoned');

/**
 * Runs one stage of one job: counts its time, hands the handler its context, closes the sandboxes
 * the stage opened, turns failures into the handler's fallback, and moves the job on.
 * Never throws: a stage never takes a worker down with it.
 */
export class StageRunner {
  constructor(private readonly o: StageRunnerOptions) {}

  async run(job: Job, stage: Stage): Promise<void> {
    if (job.terminal) return;
    if (job.discarded) {
      // Cancelled (POST /cancel, /stop) before this stage began: end it here, or nothing would ever
      // answer its waiter. Only a cancel discards a job, and a timeout can fire inside a stage only.
      this.o.finish(job, 'cancelled');
      return;
    }
    transition(job, stage);
    const t0 = this.o.clock.now();
    job.timer.resume();
    const ctx = this.context(job, stage);
    let out: unknown;
    let error: unknown;
    let failed = false;
    try {
      out = await this.guard(job, this.call(job, stage, ctx));
    } catch (err) {
      failed = true;
      error = err;
    }
    job.timer.pause();
    const seconds = (this.o.clock.now() - t0) / 1000;
    job.stageSeconds[stage] += seconds;
    this.o.observer?.stage?.(stage, seconds);

    const aborted = job.isAborted;
    const runtime = stage === 'init' && !failed && !aborted && out !== ABANDONED ? (out as InitResult | undefined)?.runtime : undefined;
    if (runtime) job.runtime = runtime;
    // Most stages open nothing: then no promise and no await (the hot path of a no-op job).
    const sandboxes = ctx.endSandboxes();
    if (sandboxes && sandboxes.count > 0) {
      const cleanup = sandboxes.closeAll(runtime);
      if (out === ABANDONED) this.o.track(cleanup);
      else await cleanup;
    } else sandboxes?.end();
    if (stage === 'run') {
      job.session?.release();
      if (job.runtime) {
        const closing = this.closeRuntime(job);
        if (out === ABANDONED) this.o.track(closing);
        else await closing;
      }
    }

    if (job.terminal) return;
    // A cancel that arrived while this stage's sandboxes were closing counts too.
    if (aborted || job.isAborted) {
      if (stage === 'run' && !failed && out !== ABANDONED && out) job.run = out as RunResult;
      this.o.finish(job, cancellationKind(job.reason) === 'timeout' ? 'timed_out' : 'cancelled');
      return;
    }
    if (failed) {
      job.criticalError = stage;
      job.errorMessage = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      job.traceback = error instanceof Error && error.stack ? error.stack : job.errorMessage;
      job.patches.push(this.hook(job, stage, ctx, error));
      if (stage === 'init') return this.o.finish(job, 'failed');
      if (stage === 'eval') {
        job.patches.push(this.finalResult(job, ctx));
        return this.o.finish(job, 'failed');
      }
      job.run = fallbackRun();
      transition(job, 'queued_eval');
      return this.o.next(job, 'eval');
    }
    if (stage === 'init') {
      job.init = (out as InitResult | undefined) ?? {};
      transition(job, 'queued_run');
      return this.o.next(job, 'run');
    }
    if (stage === 'run') {
      job.run = out as RunResult;
      transition(job, 'queued_eval');
      return this.o.next(job, 'eval');
    }
    job.patches.push(this.finalResult(job, ctx));
    this.o.finish(job, job.criticalError ? 'failed' : 'done', out as EvalResult);
  }

  /** Closes the runtime INIT returned (after RUN, or when the job ends early). Never throws. */
  async closeRuntime(job: Job): Promise<void> {
    const rt = job.runtime;
    job.runtime = undefined;
    await rt?.close().catch((err: unknown) => this.o.log.warn({ err, job: job.id }, 'closing the runtime sandbox failed'));
  }

  private context(job: Job, stage: Stage): StageCtx & Record<string, unknown> {
    const ctx = new StageCtx(job, this.o.config.handlers[job.handler.name] ?? {}, this.o.log, this.o.sandboxes, this.o.tokenizer) as StageCtx & Record<string, unknown>;
    if (stage === 'run') {
      job.session = new JobLlmSession({
        pool: this.o.pool, jobId: job.key, groupId: job.request.group_id, sampling: job.request.sampling_params, seed: job.seed, clock: this.o.clock, observer: this.o.observer,
        // Time held by a paused server is not the job's: its timeout counts stage time only.
        onHold: (held) => (held ? job.timer.pause() : job.timer.resume()),
      });
      job.session.bind();
      ctx.runtime = job.runtime;
      ctx.init = job.init ?? {};
      ctx.llm = job.session;
    } else if (stage === 'eval') {
      ctx.run = job.run ?? fallbackRun();
    }
    return ctx;
  }

  private call(job: Job, stage: Stage, ctx: any): Promise<unknown> {
    try {
      return Promise.resolve(job.handler[stage](ctx));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** The stage's promise, or ABANDONED once the job is aborted and cancel_grace_ms has passed. */
  private guard(job: Job, work: Promise<unknown>): Promise<unknown> {
    if (job.isAborted) return work;
    return new Promise((resolve, reject) => {
      let timer: unknown;
      job.stageAbort = () => (timer = this.o.clock.setTimeout(() => resolve(ABANDONED), this.o.config.cancel_grace_ms));
      work.then(
        (v) => {
          job.stageAbort = undefined;
          if (timer !== undefined) this.o.clock.clearTimeout(timer);
          resolve(v);
        },
        (e) => {
          job.stageAbort = undefined;
          if (timer !== undefined) this.o.clock.clearTimeout(timer);
          reject(e);
        },
      );
    });
  }

  private hook(job: Job, stage: Stage, ctx: unknown, err: unknown): Partial<Result> {
    const fn = job.handler[`${stage}Exception`] as ((c: unknown, e: unknown) => Partial<Result>) | undefined;
    try {
      return fn ? (fn.call(job.handler, ctx, err) ?? {}) : {};
    } catch (hookErr) {
      this.o.log.warn({ err: hookErr, job: job.id }, `${job.handler.name}.${stage}Exception threw`);
      return {};
    }
  }

  private finalResult(job: Job, ctx: unknown): Partial<Result> {
    try {
      return job.handler.finalResult?.(ctx as never) ?? {};
    } catch (err) {
      this.o.log.warn({ err, job: job.id }, `${job.handler.name}.finalResult threw`);
      return {};
    }
  }
}

/**
 * What a handler's stage gets as `ctx`: one object per stage with `signal` and `tokenizer` read
 * lazily (an AbortController and the ~1 s tokenizer load cost nothing when the stage never reads
 * them), and `job`, the job's info, built once per job.
 */
class StageCtx {
  readonly job: Job['info'];
  readonly #job: Job;
  readonly #tokenizer: () => Tokenizer;
  readonly #runtime: LazySandboxRuntime;
  #sandboxes: StageSandboxes | undefined;
  #ended = false;
  constructor(
    job: Job,
    readonly config: Record<string, unknown>,
    readonly log: Logger,
    runtime: LazySandboxRuntime,
    tokenizer: () => Tokenizer,
  ) {
    this.#job = job;
    this.#tokenizer = tokenizer;
    this.#runtime = runtime;
    this.job = job.info;
  }
  get signal(): AbortSignal {
    return this.#job.signal;
  }
  get tokenizer(): Tokenizer {
    return this.#tokenizer();
  }
  /** The stage's sandbox opener, made on first read (a stage that opens nothing makes none). */
  get sandboxes(): StageSandboxes {
    if (!this.#sandboxes) {
      this.#sandboxes = new StageSandboxes(this.#runtime, this.#job);
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
