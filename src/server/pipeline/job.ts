import type { JobState, ProcessRequest, Result } from '../../protocol/process.js';
import type { AgentHandler, InitResult, JobInfo, RunResult } from '../handlers/types.js';
import type { Sandbox } from '../sandbox/types.js';
import type { PausableTimer } from './timer.js';
import type { JobLlmSession } from '../llm/session.js';
import type { BackendPool } from '../llm/pool.js';
import type { Tenant } from '../tenants/tenant.js';
import { randomInt } from 'node:crypto';
import { seedOf } from '../../util/hash.js';
import { JobAbort } from './abort.js';

/** The three stages, in order. */
export type Stage = 'init' | 'run' | 'eval';
export const STAGES: readonly Stage[] = ['init', 'run', 'eval'];

/** Allowed edges of the job state machine; every change goes through `transition`. */
const EDGES: Record<JobState, readonly JobState[]> = {
  queued_init: ['init', 'cancelled'],
  init: ['queued_run', 'failed', 'cancelled', 'timed_out'],
  queued_run: ['run', 'cancelled'],
  run: ['queued_eval', 'failed', 'cancelled', 'timed_out'],
  queued_eval: ['eval', 'cancelled'],
  eval: ['done', 'failed', 'cancelled', 'timed_out'],
  done: [],
  failed: [],
  cancelled: [],
  timed_out: [],
};

/** True for done | failed | cancelled | timed_out. */
export function isTerminal(state: JobState): boolean {
  return EDGES[state].length === 0;
}

/** The one place a job's state changes. Throws on an edge the machine does not have (a pipeline bug). */
export function transition(job: Job, to: JobState): void {
  if (!EDGES[job.state].includes(to)) throw new Error(`job ${job.id}: illegal transition ${job.state} -> ${to}`);
  const from = job.state;
  job.state = to;
  job.onTransition?.(job, from);
}

/**
 * The pipeline's last resort when its own code threw mid-job: ends the job in `state` from wherever
 * it is, so its waiters still get a result. A legal edge goes through `transition`.
 */
export function forceEnd(job: Job, state: 'failed' | 'cancelled'): void {
  if (job.terminal) return;
  if (EDGES[job.state].includes(state)) transition(job, state);
  else {
    const from = job.state;
    job.state = state;
    job.onTransition?.(job, from);
  }
}

/** One rollout job as the pipeline tracks it. */
export class Job {
  state: JobState = 'queued_init';
  /** The job's one abort channel: cancel, /stop and timeout abort it, wherever the job is (queued or in a stage). */
  readonly abortSource = new JobAbort();
  private seedValue: number | undefined;
  private infoValue: JobInfo<unknown> | undefined;
  /** Called after every state change (the pipeline's observer: events, the console). Must not throw. */
  onTransition: ((job: Job, from: JobState) => void) | undefined;
  /** Cancelled by /stop or a shutdown: answered, then forgotten, so a resubmission of its id runs anew. */
  forget = false;
  timer!: PausableTimer;
  init: InitResult | undefined;
  run: RunResult | undefined;
  /** Fields a stage's exception hook returned, merged after that stage's own output. */
  patches: Array<Partial<Result>> = [];
  criticalError: Result['critical_error'] = null;
  errorMessage: string | null = null;
  /** The stack of the exception that failed a stage. */
  traceback: string | undefined;
  /** The runtime INIT returned; lives until RUN ends. */
  runtime: Sandbox | undefined;
  session: JobLlmSession | undefined;
  /** Its tenant: stage slots are charged to it; unset (pipeline unit tests): the limiter's sole holder. */
  tenant: Tenant | undefined;
  /** Its priority class at every stage (higher first). */
  priority = 0;
  /** Its tenant's LLM backends; unset: the pipeline's pool. */
  pool: BackendPool | undefined;
  /** Seconds spent inside each stage. */
  stageSeconds = { init: 0, run: 0, eval: 0 };
  /** Wall-clock ms (Date.now) when the job ended, for the results journal's ttl. */
  endedAtWall = 0;
  /** The result as JSON text, once the job ended: serialized once for every waiter, the store and the journal. */
  readonly finished: Promise<string>;
  private resolveFinished!: (json: string) => void;

  constructor(
    /** The client's job_id (or the UUID the server made): what the result, /cancel and /jobs/:id use. */
    readonly id: string,
    /** Unique among live jobs (`id` unless another live job has it): names LLM requests. */
    readonly key: string,
    readonly request: ProcessRequest,
    readonly handler: AgentHandler<unknown>,
    /** The instance as the handler's schema returned it. */
    readonly instance: unknown,
    readonly createdAt: number,
  ) {
    this.finished = new Promise((r) => (this.resolveFinished = r));
  }

  /**
   * The job's seed. With `sampling_params.seed`: hash of (seed, the request's job_id), so a
   * resubmission reproduces its rollout and a group's jobs differ. Without: fresh for every job.
   */
  get seed(): number {
    const sp = this.request.sampling_params.seed;
    return (this.seedValue ??= sp === undefined ? randomInt(0x7fffffff) : seedOf(sp, this.request.job_id || ''));
  }

  /** Aborts on cancel or timeout; the reason is a CancelledError or a TimeoutError. */
  get signal(): AbortSignal {
    return this.abortSource.signal;
  }

  get isAborted(): boolean {
    return this.abortSource.aborted;
  }

  get reason(): unknown {
    return this.abortSource.reason;
  }

  /** Aborts the job (once: later reasons are ignored). */
  abort(reason: unknown): void {
    this.abortSource.abort(reason);
  }

  /** What handlers see as `ctx.job`: built once, at the job's first stage, and shared by its stages. */
  get info(): JobInfo<unknown> {
    return (this.infoValue ??= {
      id: this.id,
      instance: this.instance,
      samplingParams: this.request.sampling_params,
      groupId: this.request.group_id,
      policyVersion: this.request.policy_version,
      seed: this.seed,
    });
  }

  get terminal(): boolean {
    return isTerminal(this.state);
  }

  /** Releases every waiter with the result's JSON. */
  settle(json: string): void {
    this.resolveFinished(json);
  }
}
