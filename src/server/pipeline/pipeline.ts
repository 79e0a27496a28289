import { randomUUID } from 'node:crypto';
import { CancelledError, RaasError, TimeoutError } from '../../protocol/errors.js';
import type { JobState, Result } from '../../protocol/process.js';
import type { ServerConfig } from '../../protocol/config-server.js';
import type { StatusResponse } from '../../protocol/status.js';
import type { PrefetchResponse } from '../../protocol/prefetch.js';
import type { Clock } from '../../util/clock.js';
import type { Tokenizer } from '../../tokens/tokenizer.js';
import type { HandlerRegistry } from '../handlers/registry.js';
import type { AdmissionEnv, Logger } from '../handlers/types.js';
import type { BackendPool } from '../llm/pool.js';
import { Job, STAGES, forceEnd, transition, type Stage } from './job.js';
import type { ResultsJournal } from './journal.js';
import { admissionEnv, admit, instanceHash } from './intake.js';
import { resultJson } from './result.js';
import { LiveJobIndex } from './live.js';
import { ResultStore } from './results.js';
import { LazySandboxRuntime } from './sandboxes.js';
import { prefetchImages } from './prefetch.js';
import { StageLimiter } from './limiter.js';
import { runJob, type LifecycleEnv, type LifecycleObserver, type Outcome } from './lifecycle.js';
import { PausableTimer } from './timer.js';
import { TenantSet } from '../tenants/tenants.js';
import type { Tenant } from '../tenants/tenant.js';
import { initialSize } from './sizing.js';
import { Autosizer } from './autosize.js';
import { hostSampler, type HostSampler } from './host-load.js';
import { fleetStatus, tenantStatus, type LiveJobs } from './status.js';

/** What the pipeline reports to /metrics. */
export interface PipelineObserver extends LifecycleObserver {
  jobEnded?(state: JobState, tenant: string): void;
  /** A /process body carried a top-level key the server does not read (it was ignored). */
  ignoredKey?(key: string): void;
  /** A job waited `seconds` for a slot of `stage`. */
  queueWait?(stage: Stage, tenant: string, seconds: number): void;
  /** A job held a slot of `stage` for `seconds`. */
  slotHeld?(stage: Stage, tenant: string, seconds: number): void;
  /** A tenant asked for a job id only another tenant has (answered as unknown). */
  foreignLookup?(tenant: string): void;
  /**
   * A job was admitted (`from` undefined) or changed state. For a terminal state it is called once
   * the result is built, with the result. Must not throw.
   */
  jobState?(job: Job, from: JobState | undefined, result?: Result): void;
}

export interface PipelineOptions {
  config: ServerConfig;
  registry: HandlerRegistry;
  pool: BackendPool;
  /** The tokenizer handlers get as ctx.tokenizer; resolved on first use (loading Qwen3 takes ~1 s). */
  tokenizer: () => Tokenizer;
  clock: Clock;
  /** Wall clock (ms since epoch) for the journal's ttl across restarts. */
  wallNow?: () => number;
  log: Logger;
  journal?: ResultsJournal;
  observer?: PipelineObserver;
  /** The server's tenants (default: one implicit tenant using `pool`). */
  tenants?: TenantSet;
  /** The host's CPU and memory as `workers: auto` reads them (default: this machine's). */
  host?: HostSampler;
}

/** What /process gets back: the job's id and its eventual result. */
export interface Submission {
  jobId: string;
  /** The result as JSON text. */
  finished: Promise<string>;
  /** True when the request asked to attach (`attach: true`) and found a job with its id. */
  attached: boolean;
}

/**
 * The three-stage pipeline: intake, the live jobs, status and the results journal. Each admitted
 * job runs as one lifecycle (`runJob`: INIT → RUN → EVAL, each stage awaited on its FIFO limiter
 * of `workers.<stage>` slots) and is answered here when it returns; cancelling is aborting the
 * job's signal, wherever the job is. A PausableTimer per job counts its stage time. As in ProRL, every
 * /process starts a job, even under a job_id another running job has (each gets its own result);
 * `attach: true` answers from the job that has the id instead.
 */
export class Pipeline implements LiveJobs {
  /** Unfinished jobs by key (job_id, scoped by tenant), oldest first (several when clients reuse an id). */
  private readonly live = new LiveJobIndex();
  /** Finished results (the newest in memory, older ones in the journal). */
  private readonly done: ResultStore;
  /** Each stage's concurrency limit (`workers.<stage>`) and queue. */
  readonly pools: Record<Stage, StageLimiter>;
  readonly sandboxes: LazySandboxRuntime;
  /** What /process checks instances against (sandbox.data_dirs, sandbox.disk_mb). */
  private readonly admission: AdmissionEnv;
  private readonly env: LifecycleEnv;
  private readonly wallNow: () => number;
  private readonly pending = new Set<Promise<unknown>>();
  private sweeper: unknown;
  /** Unknown /process keys already logged (each is logged once; the metric counts every one). */
  private readonly loggedKeys = new Set<string>();
  state: 'running' | 'stopped' | 'stopping' | 'draining';
  private closing: Promise<void> | undefined;
  private draining: Promise<{ finished: number; cancelled: number }> | undefined;
  readonly tenants: TenantSet;
  /** Sizes the `auto` stage pools (inactive when every stage is fixed). */
  readonly autosizer: Autosizer;

  constructor(private readonly o: PipelineOptions) {
    this.wallNow = o.wallNow ?? Date.now;
    this.state = o.config.autostart ? 'running' : 'stopped';
    this.done = new ResultStore({
      ttlMs: o.config.result_ttl_s * 1000,
      max: o.config.max_kept_results,
      journal: o.journal,
      wallNow: this.wallNow,
    });
    this.sandboxes = new LazySandboxRuntime(o.config.sandbox, o.log, o.clock);
    this.admission = admissionEnv(o.config.sandbox);
    this.tenants = o.tenants ?? TenantSet.single(o.pool);
    const w = o.config.workers;
    const watch = {
      waited: (stage: Stage, h: { name: string }, ms: number) => {
        this.autosizer.grant(stage);
        o.observer?.queueWait?.(stage, h.name, ms / 1000);
      },
      held: (stage: Stage, h: { name: string }, ms: number, work: { kind: string | undefined; concurrency: number }) => {
        this.autosizer.observe(stage, ms, work.kind, work.concurrency);
        o.observer?.slotHeld?.(stage, h.name, ms / 1000);
      },
    };
    const limiter = (s: Stage) => new StageLimiter(s, initialSize(s, w[s]), o.clock, watch, this.tenants.list[0]);
    this.pools = { init: limiter('init'), run: limiter('run'), eval: limiter('eval') };
    this.autosizer = new Autosizer(this.pools, w, o.config.autosize, o.clock, o.host ?? hostSampler(), o.log);
    // A tenant at its max_running frees a slot in one stage: its jobs queued at the others may go now
    // (the later stages first, so its jobs finish before new ones start).
    for (const s of STAGES) this.pools[s].onCapFreed = () => [...STAGES].reverse().forEach((x) => this.pools[x].pump());
    this.env = {
      config: o.config,
      limiters: this.pools,
      pool: o.pool,
      sandboxes: this.sandboxes,
      tokenizer: o.tokenizer,
      clock: o.clock,
      log: o.log,
      observer: o.observer,
      background: (p) => this.track(p),
    };
    if (o.config.result_ttl_s > 0) {
      const every = Math.min(60_000, o.config.result_ttl_s * 1000);
      const sweep = (): void => {
        this.done.sweep();
        arm();
      };
      const arm = (): void => {
        this.sweeper = o.clock.setTimeout(sweep, every);
        // The sweep alone never keeps the process alive (the real clock's timers can be unref'd).
        (this.sweeper as { unref?: () => void }).unref?.();
      };
      arm();
    }
  }

  /** Reloads the journal's results (call once before serving). */
  async openJournal(): Promise<void> {
    await this.done.open();
  }

  /**
   * Validates and enqueues a /process body of `tenant` (default: the implicit tenant); with
   * `attach: true`, answers from the tenant's job that already has its job_id.
   */
  async submit(body: unknown, tenant: Tenant = this.soleTenant()): Promise<Submission> {
    const a = await admit(body, this.o.registry, this.admission, this.ignoreKey);
    const id = a.request.job_id || randomUUID();
    const priority = a.request.priority ?? tenant.priority;
    if (priority > tenant.maxPriority)
      throw new RaasError(
        'bad_request',
        `priority: ${priority} is above tenant "${tenant.name}"'s max_priority ${tenant.maxPriority}; send at most ${tenant.maxPriority}, or raise max_priority in the server's tenants section`,
      );
    if (a.request.attach) {
      const known = await this.attach(tenant, id, a.request.instance);
      if (known) return known;
    }
    if (this.state === 'draining') throw drainingError();
    if (this.state !== 'running') throw stoppedError();
    if (tenant.pool.size === 0)
      throw new RaasError(
        'no_llm_backends',
        `no LLM backend is registered${this.tenants.multi ? ` for tenant "${tenant.name}"` : ''}: POST /add_llm_server {"address": "http://host:port"} first`,
      );
    // One tenant filling the queues must not lock the others out: below its weighted share of
    // max_queued_jobs a tenant is still admitted (the queues then hold at most twice the cap).
    if (this.queued() >= this.o.config.max_queued_jobs && tenant.queued >= this.queueShare(tenant))
      throw new RaasError('queue_full', `max_queued_jobs (${this.o.config.max_queued_jobs}) jobs are waiting: retry later`);
    if (tenant.queued >= tenant.maxQueued)
      throw new RaasError(
        'tenant_quota',
        `tenant "${tenant.name}" has its max_queued (${tenant.maxQueued}) jobs waiting for a stage: retry later`,
      );
    const mapKey = tenant.key(id);
    // A second live job under one id gets its own key, so its LLM requests stay apart.
    const key = this.live.has(mapKey) ? `${id}#${randomUUID().slice(0, 8)}` : id;
    const job = new Job(id, key, a.request, a.handler, a.instance, this.o.clock.now());
    job.tenant = tenant;
    job.pool = tenant.pool;
    job.priority = priority;
    const limitMs = (a.request.timeout_s ?? this.o.config.timeout_s) * 1000;
    job.timer = new PausableTimer(limitMs, this.o.clock, () =>
      job.abort(new TimeoutError(`the job used its timeout_s of ${limitMs / 1000} s of counted stage time`)),
    );
    this.live.add(mapKey, job);
    const observe = this.o.observer?.jobState;
    if (observe) {
      // Terminal states are reported by end(), with the result.
      job.onTransition = (j, from) => {
        if (!j.terminal) observe(j, from);
      };
      observe(job, undefined);
    }
    this.track(this.drive(job));
    return { jobId: id, finished: job.finished, attached: false };
  }

  /** The newest live job of the tenant with this id and instance, else the stored result; job_conflict when the id has another instance. */
  private async attach(tenant: Tenant, id: string, instance: unknown): Promise<Submission | undefined> {
    const key = tenant.key(id);
    const jobs = this.live.get(key);
    if (jobs) {
      const hash = instanceHash(instance);
      const job = jobs.findLast((j) => instanceHash(j.request.instance) === hash);
      if (!job) throw conflict(id);
      return { jobId: id, finished: job.finished, attached: true };
    }
    const f = this.done.record(key);
    if (!f) {
      this.noteForeign(tenant, id);
      return undefined;
    }
    const known = f.hash ?? (f.instance === undefined ? undefined : instanceHash(f.instance));
    if (known !== undefined && known !== instanceHash(instance)) throw conflict(id);
    const json = await this.done.json(key, f);
    // A result the journal no longer has (file replaced by hand) counts as unknown: a new job runs.
    return json === undefined ? undefined : { jobId: id, finished: Promise.resolve(json), attached: true };
  }

  private readonly ignoreKey = (key: string): void => {
    this.o.observer?.ignoredKey?.(key);
    if (this.loggedKeys.has(key) || this.loggedKeys.size >= 1000) return;
    this.loggedKeys.add(key);
    this.o.log.debug({ key }, 'ignored an unknown top-level /process key (as ProRL does); raas_ignored_request_keys_total counts them');
  };

  /**
   * POST /cancel: cancels every live job with this id (all four effects, in any state). An id with
   * no live job answers too, as in ProRL: its finished state, or `unknown`.
   */
  cancel(id: string, scope?: Tenant): { status: 'ok'; job_id: string; cancelled: boolean; state: JobState | 'unknown' } {
    const tenants = this.scopeOf(scope);
    const jobs = tenants.flatMap((t) => this.live.get(t.key(id)) ?? []);
    if (jobs.length === 0) {
      const state = tenants.map((t) => this.done.record(t.key(id))?.state).find((s) => s !== undefined);
      if (state === undefined && scope) this.noteForeign(scope, id);
      return { status: 'ok', job_id: id, cancelled: false, state: state ?? 'unknown' };
    }
    for (const job of jobs) this.cancelJob(job, new CancelledError('cancelled by POST /cancel'));
    return { status: 'ok', job_id: id, cancelled: true, state: 'cancelled' };
  }

  /** A tenant's weighted share of max_queued_jobs (all of it on a server without tenants). */
  private queueShare(t: Tenant): number {
    const weights = this.tenants.list.reduce((n, x) => n + x.weight, 0);
    return Math.ceil((this.o.config.max_queued_jobs * t.weight) / weights);
  }

  /** The tenants a request reaches: its own, or every one (the admin, `scope` undefined). */
  private scopeOf(scope: Tenant | undefined): readonly Tenant[] {
    return scope ? [scope] : this.tenants.list;
  }

  /** The implicit tenant; on a multi-tenant server a caller must name one. */
  private soleTenant(): Tenant {
    const t = this.tenants.sole;
    if (!t) throw new RaasError('forbidden', "this server has tenants: send a tenant's token to submit jobs");
    return t;
  }

  /**
   * A tenant asked for an id it does not have: if another tenant has it, the lookup is counted
   * (raas_cross_tenant_lookups_total): the answer was "unknown", as for an id nobody has.
   */
  private noteForeign(asker: Tenant, id: string): void {
    if (!this.tenants.multi) return;
    for (const t of this.tenants.list) {
      if (t === asker) continue;
      const k = t.key(id);
      if (this.live.has(k) || this.done.record(k)) {
        asker.foreignLookups++;
        this.o.observer?.foreignLookup?.(asker.name);
        return;
      }
    }
  }

  /** Aborts the job's signal: a queued job leaves its queue, a running stage is aborted (its sandboxes closed, its partial result kept). */
  private cancelJob(job: Job, reason: Error, forget = false): void {
    if (job.terminal || job.isAborted) return;
    job.forget = forget;
    job.abort(reason);
  }

  /**
   * GET /jobs/:id, as JSON text (`{job_id, state, result?}`): the newest live job with the id, else
   * its stored result (from memory, or from the journal past `max_kept_results`).
   */
  async get(id: string, scope?: Tenant): Promise<string> {
    const tenants = this.scopeOf(scope);
    for (const t of tenants) {
      const job = this.live.get(t.key(id))?.at(-1);
      if (job) return JSON.stringify({ job_id: id, state: job.state });
    }
    let f: ReturnType<ResultStore['record']>;
    let key = '';
    for (const t of tenants) {
      key = t.key(id);
      if ((f = this.done.record(key))) break;
    }
    const json = f && (await this.done.json(key, f));
    if ((!f || json === undefined) && scope) this.noteForeign(scope, id);
    if (!f || json === undefined)
      throw new RaasError(
        'job_not_found',
        `job_id ${JSON.stringify(id)} is unknown (never seen, expired, or in flight at a restart): resubmit it with the same id and attach: true`,
      );
    return `{"job_id":${JSON.stringify(id)},"state":"${f.state}","result":${json}}`;
  }

  /** POST /prefetch: starts unpacking the images of instances that will come (prefetch.ts). */
  prefetch(body: unknown): Promise<PrefetchResponse> {
    return prefetchImages(body, this.o.registry, this.admission, this.o.config.handlers, this.sandboxes);
  }

  /** POST /stop: close intake, cancel every job, close every sandbox; answers once all waiters have theirs. */
  async stop(reason = 'the server was stopped (POST /stop)'): Promise<void> {
    this.state = 'stopping';
    const jobs = [...this.live.all()];
    // The client did not ask for these cancels: their ids are forgotten once answered, like jobs
    // in flight at a crash, so resubmitting them after /start or a restart runs them.
    for (const job of jobs) this.cancelJob(job, new CancelledError(reason), true);
    await Promise.all(jobs.map((j) => j.finished));
    await this.idle();
    if (this.state === 'stopping') this.state = 'stopped';
  }

  /** POST /start: open intake (a running server stays running; a draining one stays draining). */
  start(): void {
    if (!this.closing && !this.draining) this.state = 'running';
  }

  /**
   * POST /drain: take nothing new (503 server_draining; attach still answers), let every job
   * admitted so far finish, and resolve once none is left. Jobs still unfinished after `timeoutMs`
   * are cancelled and forgotten, as by /stop, so their trainers run them elsewhere. Safe twice.
   */
  drain(timeoutMs: number): Promise<{ finished: number; cancelled: number }> {
    this.draining ??= (async () => {
      if (this.state === 'running') this.state = 'draining';
      const jobs = [...this.live.all()];
      let timer: unknown;
      const late = new Promise<'late'>((r) => (timer = this.o.clock.setTimeout(() => r('late'), timeoutMs)));
      const all = Promise.all(jobs.map((j) => j.finished)).then(() => 'done' as const);
      const how = await Promise.race([all, late]);
      this.o.clock.clearTimeout(timer);
      let cancelled = 0;
      if (how === 'late')
        for (const job of jobs)
          if (!job.terminal) {
            cancelled++;
            this.cancelJob(job, new CancelledError(`the server drained and did not finish this job within drain_timeout_s`), true);
          }
      await all;
      await this.idle();
      return { finished: jobs.length - cancelled, cancelled };
    })();
    return this.draining;
  }

  /** True once POST /drain was asked for. */
  get isDraining(): boolean {
    return this.draining !== undefined;
  }

  /** Stops everything and flushes the journal. Safe twice. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      if (this.sweeper !== undefined) this.o.clock.clearTimeout(this.sweeper);
      this.autosizer.close();
      await this.stop('the server is shutting down');
      this.state = 'stopped';
      await this.sandboxes.close();
      await this.o.journal?.close();
    })();
    return this.closing;
  }

  /**
   * What the pipeline holds, for leak checks and /metrics: live jobs, results kept (and those in
   * memory), sandbox closes still running in the background.
   */
  footprint(): { live: number; kept: number; kept_in_memory: number; pending_closes: number } {
    return { live: this.live.keys, kept: this.done.size, kept_in_memory: this.done.inMemory, pending_closes: this.pending.size };
  }

  /** Jobs waiting in the three queues together. */
  queued(): number {
    return this.pools.init.depth + this.pools.run.depth + this.pools.eval.depth;
  }

  /**
   * GET /status without the backends: the whole server (the admin, or a server without tenants),
   * or one tenant's jobs with the server's totals beside them.
   */
  status(scope?: Tenant): Omit<StatusResponse, 'backends'> {
    const base = { status: this.state, running: this.state === 'running', sandbox: this.sandboxes.describe() };
    const fleet = fleetStatus(this);
    if (!this.tenants.multi) return { ...base, ...fleet };
    if (!scope) return { ...base, ...fleet, tenants: this.tenants.list.map((t) => tenantStatus(this, t).summary) };
    const own = tenantStatus(this, scope);
    return { ...base, ...own.view, tenant: own.summary, fleet: { ...own.totals, tenants: this.tenants.list.length } };
  }

  /** Every live job (status.ts counts them). */
  *liveJobs(): Iterable<Job> {
    yield* this.live.all();
  }

  /** Live jobs in all. */
  get liveTotal(): number {
    return this.live.total;
  }

  /** How each stage's pool is sized (for /status). */
  sizing(s: Stage): { mode: 'fixed' | 'auto'; min?: number; max?: number; reason?: string } {
    return this.autosizer.state(s) ?? { mode: 'fixed' };
  }

  /** Runs the job's lifecycle and answers its waiters, whatever happens: a throw here is a pipeline bug, still answered as a failed job. */
  private async drive(job: Job): Promise<void> {
    let outcome: Outcome;
    try {
      outcome = await runJob(job, this.env);
    } catch (err) {
      this.o.log.error({ err, job: job.id }, 'the job lifecycle threw (a raas bug); the job ends as failed');
      job.criticalError ??= job.state === 'init' || job.state === 'run' || job.state === 'eval' ? job.state : 'eval';
      job.errorMessage ??= err instanceof Error ? `${err.name}: ${err.message}` : String(err);
      outcome = { state: job.isAborted ? 'cancelled' : 'failed' };
    }
    this.end(job, outcome);
  }

  /**
   * Ends the job: the state, the result's JSON (once, for every waiter), the live map, the store.
   * With a journal the waiters are answered once the result's line is written, so a result a client
   * has seen survives a crash (a resumed coordinator finds it instead of running the job again).
   * Never throws before the waiters have their answer.
   */
  private end(job: Job, outcome: Outcome): void {
    if (job.terminal) return;
    const from = job.state;
    try {
      transition(job, outcome.state);
    } catch {
      forceEnd(job, outcome.state === 'cancelled' ? 'cancelled' : 'failed');
    }
    const { json, result } = resultJson(job, outcome.eval, this.o.clock.now());
    job.endedAtWall = this.wallNow();
    this.live.remove(job);
    let pending = false;
    try {
      const t = job.tenant;
      if (t) t.ended[job.state] = (t.ended[job.state] ?? 0) + 1;
      this.o.observer?.jobEnded?.(job.state, t?.name ?? 'default');
      this.o.observer?.jobState?.(job, from, result);
      if (!job.forget)
        pending = this.done.put(job.id, job.state, json, job.endedAtWall, job.request.instance, t?.scope ?? '', () => job.settle(json));
    } catch (err) {
      this.o.log.error({ err, job: job.id }, 'storing a finished result failed');
    }
    if (!pending) job.settle(json);
  }

  private track(p: Promise<unknown>): void {
    const q = p.catch(() => undefined).finally(() => this.pending.delete(q));
    this.pending.add(q);
  }

  /** Resolves once every background close (sandboxes of ended stages) has settled. */
  private async idle(): Promise<void> {
    while (this.pending.size) await Promise.all([...this.pending]);
  }
}

function conflict(id: string): RaasError {
  return new RaasError(
    'job_conflict',
    `attach: true, but job_id ${JSON.stringify(id)} belongs to a job with a different instance: use a new job_id, or drop attach to start a new job`,
  );
}

/** What /process answers on a draining server. */
function drainingError(): RaasError {
  return new RaasError(
    'server_draining',
    'this server is draining (POST /drain): it finishes the jobs it holds and takes no new ones; send new jobs to another server',
  );
}

/** What every route ProRL guards answers while intake is closed (503, ProRL's detail text, and the fix). */
export function stoppedError(): RaasError {
  return new RaasError('server_stopped', 'Server is not running. Please start the server first. (POST /start opens intake.)');
}
