import { cancellationKind } from '../../protocol/errors.js';
import type { Result } from '../../protocol/process.js';
import type { ServerConfig } from '../../protocol/config-server.js';
import type { Clock } from '../../util/clock.js';
import type { Tokenizer } from '../../tokens/tokenizer.js';
import type { EvalResult, Logger } from '../handlers/types.js';
import type { Sandbox } from '../sandbox/types.js';
import type { BackendPool } from '../llm/pool.js';
import { JobLlmSession, type SessionObserver } from '../llm/session.js';
import { EvalCtx, RunCtx, StageCtx, type ContextDeps } from './context.js';
import { transition, type Job, type Stage } from './job.js';
import type { StageLimiter } from './limiter.js';
import { fallbackRun } from './result.js';
import type { LazySandboxRuntime } from './sandboxes.js';

/** What a job's lifecycle reports to /metrics. */
export interface LifecycleObserver extends SessionObserver {
  stage?(stage: Stage, seconds: number): void;
}

/** What a job's lifecycle runs on: the server's settings, its limiters, backends and sandboxes. */
export interface LifecycleEnv {
  config: ServerConfig;
  limiters: Record<Stage, StageLimiter>;
  pool: BackendPool;
  sandboxes: LazySandboxRuntime;
  tokenizer: () => Tokenizer;
  clock: Clock;
  log: Logger;
  observer?: LifecycleObserver;
  /** Takes closes the job no longer waits for (sandboxes of a stage abandoned past cancel_grace_ms), so shutdown can await them. */
  background(p: Promise<unknown>): void;
}

/** How a job ended: its terminal state and EVAL's answer (when EVAL answered). */
export interface Outcome {
  state: 'done' | 'failed' | 'cancelled' | 'timed_out';
  eval?: EvalResult;
}

/** Marks a stage the lifecycle stopped waiting for (the handler ignored its signal past the grace). */
const ABANDONED = Symbol('abandoned');

type StageEnd<C, T> = { kind: 'ok'; ctx: C; value: T } | { kind: 'failed'; ctx: C; error: unknown } | { kind: 'aborted'; value?: T };

/**
 * One job from admission to its outcome: INIT → RUN → EVAL, each stage awaited on its stage's
 * limiter with the job's signal, so cancelling a queued job and cancelling a running one are the
 * same act (aborting the signal). A failed INIT ends the job, a failed RUN goes on to EVAL with the
 * fallback trajectory (the handler's exception hooks add their fields), an abort ends it as
 * cancelled or timed out. The session and the runtime sandbox are released here and only here.
 * Never throws for anything a handler does.
 */
export async function runJob(job: Job, env: LifecycleEnv): Promise<Outcome> {
  const deps: ContextDeps = {
    config: env.config.handlers[job.handler.name] ?? {},
    log: env.log,
    sandboxes: env.sandboxes,
    tokenizer: env.tokenizer,
  };
  const h = job.handler;
  try {
    const init = await stage(
      job,
      env,
      'init',
      () => new StageCtx(job, deps),
      (ctx) => h.init(ctx),
      (v) => v?.runtime,
    );
    if (init.kind === 'aborted') return aborted(job);
    if (init.kind === 'failed') {
      failure(job, env, 'init', init.error, () => h.initException?.(init.ctx, init.error));
      return { state: 'failed' };
    }
    job.init = init.value ?? {};

    transition(job, 'queued_run');
    const run = await stage(
      job,
      env,
      'run',
      () => new RunCtx(job, deps, job.runtime, job.init ?? {}, () => openSession(job, env)),
      (ctx) => h.run(ctx),
    );
    if (run.kind === 'aborted') {
      if (run.value) job.run = run.value;
      return aborted(job);
    }
    if (run.kind === 'failed') {
      failure(job, env, 'run', run.error, () => h.runException?.(run.ctx, run.error));
      job.run = fallbackRun();
    } else job.run = run.value;

    transition(job, 'queued_eval');
    const ev = await stage(
      job,
      env,
      'eval',
      () => new EvalCtx(job, deps, job.run ?? fallbackRun()),
      (ctx) => h.eval(ctx),
    );
    if (ev.kind === 'aborted') return aborted(job);
    if (ev.kind === 'failed') failure(job, env, 'eval', ev.error, () => h.evalException?.(ev.ctx, ev.error));
    patch(job, env, 'finalResult', () => h.finalResult?.(ev.ctx));
    if (ev.kind === 'failed') return { state: 'failed' };
    return { state: job.criticalError ? 'failed' : 'done', eval: ev.value };
  } finally {
    job.timer.dispose();
    job.session?.release();
    // Ended between INIT and RUN (cancelled while queued): the runtime is not awaited by the answer.
    if (job.runtime) env.background(closeRuntime(job, env.log));
  }
}

/** The terminal state of an aborted job: timed_out when its timeout fired inside a stage, else cancelled. */
function aborted(job: Job): Outcome {
  const timeout = cancellationKind(job.reason) === 'timeout' && (job.state === 'init' || job.state === 'run' || job.state === 'eval');
  return { state: timeout ? 'timed_out' : 'cancelled' };
}

/** The job's LLM session, opened when RUN's handler first reads `ctx.llm`. */
function openSession(job: Job, env: LifecycleEnv): JobLlmSession {
  if (job.session) return job.session;
  job.session = new JobLlmSession({
    pool: job.pool ?? env.pool,
    jobId: job.key,
    groupId: job.request.group_id,
    sampling: job.request.sampling_params,
    seed: job.seed,
    clock: env.clock,
    observer: env.observer,
    // Time held by a paused server is not the job's: its timeout counts stage time only.
    onHold: (held) => (held ? job.timer.pause() : job.timer.resume()),
  });
  // Read after RUN ended (a handler that kept its context): a session that binds nothing.
  if (job.state === 'run') job.session.bind();
  else job.session.release();
  return job.session;
}

/**
 * One stage of one job: waits for a slot of the stage (or the job's abort), counts the stage's
 * time, calls the handler, closes the sandboxes the stage opened (all but the runtime INIT
 * returns), and after RUN the session and the runtime.
 */
async function stage<C extends StageCtx, T>(
  job: Job,
  env: LifecycleEnv,
  name: Stage,
  makeCtx: () => C,
  call: (ctx: C) => Promise<T>,
  keep?: (value: T) => Sandbox | undefined,
): Promise<StageEnd<C, T>> {
  const limiter = env.limiters[name];
  const want = { holder: job.tenant, priority: job.priority, kind: job.handler.name };
  let release = limiter.tryAcquire(job.abortSource, want);
  if (!release)
    try {
      release = await limiter.acquire(job.abortSource, want);
    } catch {
      return { kind: 'aborted' };
    }
  try {
    transition(job, name);
    const t0 = env.clock.now();
    job.timer.resume();
    const ctx = makeCtx();
    let got: { value: T } | typeof ABANDONED | undefined;
    let error: unknown;
    try {
      got = await guard(job, env, invoke(call, ctx));
    } catch (err) {
      error = err;
    }
    job.timer.pause();
    const seconds = (env.clock.now() - t0) / 1000;
    job.stageSeconds[name] += seconds;
    env.observer?.stage?.(name, seconds);

    const abandoned = got === ABANDONED;
    const value = got === undefined || got === ABANDONED ? undefined : got.value;
    const runtime = value !== undefined && !job.isAborted ? keep?.(value) : undefined;
    if (runtime) job.runtime = runtime;
    // Most stages open nothing: then no promise and no await (the hot path of a no-op job).
    const opened = ctx.endSandboxes();
    if (opened && opened.count > 0) await settle(env, abandoned, opened.closeAll(runtime));
    else opened?.end();
    if (name === 'run') {
      job.session?.release();
      if (job.runtime) await settle(env, abandoned, closeRuntime(job, env.log));
    }
    // A cancel that arrived while this stage's sandboxes were closing counts too.
    if (job.isAborted) return { kind: 'aborted', value };
    if (got === undefined || got === ABANDONED) return { kind: 'failed', ctx, error };
    return { kind: 'ok', ctx, value: got.value };
  } finally {
    release();
  }
}

/** Awaits a close, or hands it to the background when the stage was abandoned (its handler may still hold the sandbox). */
function settle(env: LifecycleEnv, abandoned: boolean, close: Promise<void>): Promise<void> {
  if (!abandoned) return close;
  env.background(close);
  return Promise.resolve();
}

/** The handler's stage as a promise (a synchronous throw becomes a rejection). */
function invoke<C, T>(call: (ctx: C) => Promise<T>, ctx: C): Promise<T> {
  try {
    return Promise.resolve(call(ctx));
  } catch (err) {
    return Promise.reject(err);
  }
}

/** The stage's promise, or ABANDONED once the job is aborted and cancel_grace_ms has passed. */
function guard<T>(job: Job, env: LifecycleEnv, work: Promise<T>): Promise<{ value: T } | typeof ABANDONED> {
  return new Promise((resolve, reject) => {
    let timer: unknown;
    const onAbort = (): void => {
      timer = env.clock.setTimeout(() => resolve(ABANDONED), env.config.cancel_grace_ms);
    };
    if (job.isAborted) onAbort();
    else job.abortSource.addEventListener('abort', onAbort);
    const done = (): void => {
      job.abortSource.removeEventListener('abort', onAbort);
      if (timer !== undefined) env.clock.clearTimeout(timer);
    };
    work.then(
      (value) => {
        done();
        resolve({ value });
      },
      (e: unknown) => {
        done();
        reject(e);
      },
    );
  });
}

/** Records a failed stage on the job (critical_error, the message, the stack) and its exception hook's fields. */
function failure(job: Job, env: LifecycleEnv, name: Stage, error: unknown, hook: () => Partial<Result> | undefined): void {
  job.criticalError = name;
  job.errorMessage = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  job.traceback = error instanceof Error && error.stack ? error.stack : job.errorMessage;
  patch(job, env, `${name}Exception`, hook);
}

/** A hook's fields, merged into the result in order; a hook that throws adds nothing. */
function patch(job: Job, env: LifecycleEnv, hookName: string, hook: () => Partial<Result> | undefined): void {
  try {
    job.patches.push(hook() ?? {});
  } catch (err) {
    env.log.warn({ err, job: job.id }, `${job.handler.name}.${hookName} threw`);
    job.patches.push({});
  }
}

/** Closes the runtime INIT returned (after RUN, or when the job ends early). Never throws. */
async function closeRuntime(job: Job, log: Logger): Promise<void> {
  const rt = job.runtime;
  job.runtime = undefined;
  await rt?.close().catch((err: unknown) => log.warn({ err, job: job.id }, 'closing the runtime sandbox failed'));
}
