import type { BackendEvent, JobEvent, ServerEvent } from '../../protocol/events.js';
import type { JobState, Result } from '../../protocol/process.js';
import { EventLog } from '../../ui/event-log.js';
import type { Backend, BackendChange } from '../llm/pool.js';
import type { Job } from '../pipeline/job.js';
import { JobIndex } from './job-index.js';
import { Throughput } from './throughput.js';

/** Cuts a result's error for an event (the whole text is in the result). */
const cut = (s: string | null | undefined): string | null => (s == null ? null : s.length > 500 ? `${s.slice(0, 500)}…` : s);

/**
 * The server's event feed: job and backend changes become numbered events in a bounded log
 * (`GET /events` streams it), and the console's job index and throughput chart are kept from the
 * same events. The pipeline and the pool call `jobState` and `backendChange` (their observers);
 * building an event allocates one small object, and nothing is serialized until a client reads it.
 */
export class ConsoleFeed {
  readonly log: EventLog<ServerEvent>;
  readonly jobs: JobIndex;
  /** The whole server's throughput (the admin's chart). */
  readonly throughput = new Throughput();
  /** Each tenant's own (a tenant's chart: another tenant's jobs and rewards are not its business). */
  private readonly tenantThroughput = new Map<string, Throughput>();

  /** Whether events name their tenant (a server with a `tenants:` section). */
  private readonly named: boolean;

  constructor(
    opts: { eventBuffer: number; recentJobs: number; tenants?: boolean },
    private readonly wallNow: () => number,
  ) {
    this.log = new EventLog(opts.eventBuffer);
    this.jobs = new JobIndex(opts.recentJobs);
    this.named = opts.tenants ?? false;
  }

  /** The pipeline's observer: a job was admitted (`from` undefined) or changed state. */
  jobState(job: Job, from: JobState | undefined, result?: Result): void {
    const inst = job.instance as { instance_id?: string | number } | null;
    const raw = job.request.instance;
    const e: JobEvent = {
      type: 'job',
      at: this.wallNow(),
      job_id: job.id,
      state: job.state,
      data_source: job.handler.name,
      instance_id: inst?.instance_id ?? raw.instance_id ?? null,
    };
    if (from !== undefined) e.from = from;
    if (job.request.group_id !== undefined) e.group_id = job.request.group_id;
    if (this.named && job.tenant) e.tenant = job.tenant.name;
    if (result) {
      e.reward = result.reward;
      e.critical_error = result.critical_error;
      e.finish_reason = result.finish_reason;
      e.num_turns = result.num_turns;
      e.filter = result.filter;
      e.error = cut(result.error);
      const t = result.timing;
      e.timing = { queued_s: t.queued_s, init_s: t.init_s, run_s: t.run_s, eval_s: t.eval_s };
    }
    this.jobs.apply(e);
    this.throughput.apply(e);
    if (e.tenant !== undefined) this.throughputOf(e.tenant).apply(e);
    this.log.emit('job', e);
  }

  /** A tenant's own throughput (zeros until its first job). */
  throughputOf(tenant: string): Throughput {
    let t = this.tenantThroughput.get(tenant);
    if (!t) this.tenantThroughput.set(tenant, (t = new Throughput()));
    return t;
  }

  /** The pool's observer: a backend was added, removed, or changed health or weight_version. */
  backendChange(b: Backend, change: BackendChange, tenant?: string): void {
    const e: BackendEvent = { type: 'backend', at: this.wallNow(), change, backend: { ...b.info(), last_error: b.lastError } };
    if (tenant !== undefined) e.tenant = tenant;
    this.log.emit('backend', e);
  }
}
