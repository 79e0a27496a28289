import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Stage } from './pipeline/job.js';
import { CountingHistogram } from './counting-histogram.js';

/** What the metrics read at scrape time (so the /process hot path updates nothing it need not). */
export interface MetricsSource {
  queueDepth(stage: Stage): number;
  busyWorkers(stage: Stage): number;
  backends(): Array<{ address: string; active: number; assigned: number }>;
  /** Characters the tokenizer pool encoded off the event loop (0 without a pool). */
  offloadedChars?(): number;
  /** Slots of each stage pool now (they move with `workers: auto`). */
  workerSize?(stage: Stage): number;
  /** Each tenant's jobs waiting for a stage and inside one. */
  tenants?(): Array<{ name: string; queued: number; running: number }>;
}

let processRegistry: Registry | undefined;

/**
 * The process's own figures (heap, RSS, GC, event-loop lag, handles) under prom-client's standard
 * names (nodejs_*, process_*): what a long run's memory is judged by. Collected once per process,
 * not per server: prom-client's GC observer and event-loop monitor are never stopped, so one per
 * server would pile up in a process that starts many.
 */
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

/** Distinct `key` labels of raas_ignored_request_keys_total before the rest count as "other". */
const MAX_KEY_LABELS = 64;

/**
 * The server's Prometheus metrics, in a registry of its own (several servers can share a process).
 * Gauges are collected from the pipeline at scrape time; counters and histograms are observed as
 * jobs end.
 */
export class ServerMetrics {
  readonly registry = new Registry();
  private readonly jobs: Counter<'state'>;
  private readonly stageSeconds: CountingHistogram<'stage'>;
  private readonly llmSeconds: Histogram<'api'>;
  private readonly moves: Counter;
  private readonly ignored: Counter<'key'>;
  private readonly ignoredLabels = new Set<string>();
  private readonly stageChildren: Partial<Record<Stage, (v: number) => void>> = {};
  private readonly jobChildren = new Map<string, { inc(): void }>();
  private readonly tenantJobs: Counter<'tenant' | 'state'>;
  private readonly queueWait: CountingHistogram<'stage' | 'tenant'>;
  private readonly tenantStage: CountingHistogram<'stage' | 'tenant'>;
  /** Recorders of the per-job histograms by stage and tenant (made once per label set). */
  private readonly recorders = new Map<string, (v: number) => void>();
  private readonly foreign: Counter<'tenant'>;
  private readonly children = new Map<string, { observe(v: number): void; inc(): void }>();

  constructor(source: MetricsSource) {
    const registers = [this.registry];
    processMetrics();
    new Gauge({
      name: 'raas_queue_depth',
      help: 'Jobs waiting in each stage queue',
      labelNames: ['stage'],
      registers,
      collect() {
        for (const s of ['init', 'run', 'eval'] as const) this.set({ stage: s }, source.queueDepth(s));
      },
    });
    new Gauge({
      name: 'raas_workers_busy',
      help: 'Busy workers of each stage pool',
      labelNames: ['stage'],
      registers,
      collect() {
        for (const s of ['init', 'run', 'eval'] as const) this.set({ stage: s }, source.busyWorkers(s));
      },
    });
    new Gauge({
      name: 'raas_backend_active',
      help: 'Jobs in RUN bound to each LLM backend',
      labelNames: ['backend'],
      registers,
      collect() {
        this.reset();
        for (const b of source.backends()) this.set({ backend: b.address }, b.active);
      },
    });
    new Gauge({
      name: 'raas_backend_assigned',
      help: 'Assignments since registration of each LLM backend',
      labelNames: ['backend'],
      registers,
      collect() {
        this.reset();
        for (const b of source.backends()) this.set({ backend: b.address }, b.assigned);
      },
    });
    new Gauge({
      name: 'raas_tokenizer_offloaded_chars_total',
      help: 'Characters of long texts (tool outputs) encoded on the tokenizer worker pool, off the event loop',
      registers,
      collect() {
        this.set(source.offloadedChars?.() ?? 0);
      },
    });
    new Gauge({
      name: 'raas_workers_size',
      help: 'Slots of each stage pool (sized by the server when workers are auto)',
      labelNames: ['stage'],
      registers,
      collect() {
        for (const s of ['init', 'run', 'eval'] as const) this.set({ stage: s }, source.workerSize?.(s) ?? 0);
      },
    });
    new Gauge({
      name: 'raas_tenant_jobs',
      help: "Each tenant's jobs waiting for a stage (queued) and inside one (running)",
      labelNames: ['tenant', 'state'],
      registers,
      collect() {
        this.reset();
        for (const t of source.tenants?.() ?? []) {
          this.set({ tenant: t.name, state: 'queued' }, t.queued);
          this.set({ tenant: t.name, state: 'running' }, t.running);
        }
      },
    });
    this.jobs = new Counter({ name: 'raas_jobs_total', help: 'Jobs by terminal state', labelNames: ['state'], registers });
    this.tenantJobs = new Counter({
      name: 'raas_tenant_jobs_total',
      help: 'Jobs by tenant and terminal state',
      labelNames: ['tenant', 'state'],
      registers,
    });
    const waits = [0.001, 0.01, 0.1, 0.5, 1, 5, 15, 60, 300, 1800];
    // The three histograms every job observes (nine times per job) only count; prom-client writes them.
    this.queueWait = new CountingHistogram(
      'raas_queue_wait_seconds',
      'Time a job waited for a slot of each stage, by tenant',
      ['stage', 'tenant'],
      waits,
      registers,
    );
    this.tenantStage = new CountingHistogram(
      'raas_tenant_stage_seconds',
      "Time a tenant's job held a slot of each stage (its sum over tenants is each tenant's share of the stage)",
      ['stage', 'tenant'],
      [0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 1800],
      registers,
    );
    this.foreign = new Counter({
      name: 'raas_cross_tenant_lookups_total',
      help: 'Lookups (GET /jobs/:id, /cancel, attach) by a tenant of a job id only another tenant has: answered as unknown',
      labelNames: ['tenant'],
      registers,
    });
    this.stageSeconds = new CountingHistogram(
      'raas_stage_duration_seconds',
      'Time inside each stage',
      ['stage'],
      [0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 1800],
      registers,
    );
    this.llmSeconds = new Histogram({
      name: 'raas_llm_call_duration_seconds',
      help: 'Latency of one LLM call',
      labelNames: ['api'],
      registers,
      buckets: [0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 120],
    });
    this.moves = new Counter({ name: 'raas_backend_moves_total', help: 'Jobs moved off an LLM backend that stopped answering', registers });
    this.ignored = new Counter({
      name: 'raas_ignored_request_keys_total',
      help: 'Unknown top-level /process keys, ignored as ProRL ignores them',
      labelNames: ['key'],
      registers,
    });
  }

  jobEnded(state: string, tenant = 'default'): void {
    let child = this.jobChildren.get(state);
    if (!child) this.jobChildren.set(state, (child = this.jobs.labels({ state })));
    child.inc();
    this.child(`j\0${tenant}\0${state}`, () => this.tenantJobs.labels({ tenant, state })).inc();
  }
  /** A job of `tenant` waited `seconds` for a slot of `stage`. */
  waited(stage: Stage, tenant: string, seconds: number): void {
    this.recorder(`w\0${stage}\0${tenant}`, this.queueWait, stage, tenant)(seconds);
  }
  /** A job of `tenant` held a slot of `stage` for `seconds`. */
  held(stage: Stage, tenant: string, seconds: number): void {
    this.recorder(`h\0${stage}\0${tenant}`, this.tenantStage, stage, tenant)(seconds);
  }
  private recorder(key: string, h: CountingHistogram<'stage' | 'tenant'>, stage: Stage, tenant: string): (v: number) => void {
    let r = this.recorders.get(key);
    if (!r) this.recorders.set(key, (r = h.child({ stage, tenant })));
    return r;
  }
  /** `tenant` asked for a job id only another tenant has. */
  foreignLookup(tenant: string): void {
    this.foreign.inc({ tenant });
  }
  /** Label lookups cost more than the observation: one child per label set, made once. */
  private child<T extends { observe?(v: number): void; inc?(): void }>(
    key: string,
    make: () => T,
  ): { observe(v: number): void; inc(): void } {
    let c = this.children.get(key);
    if (!c) this.children.set(key, (c = make() as unknown as { observe(v: number): void; inc(): void }));
    return c;
  }
  stage(stage: Stage, seconds: number): void {
    // Label lookups cost more than the observation: keep one child per stage.
    (this.stageChildren[stage] ??= this.stageSeconds.child({ stage }))(seconds);
  }
  llmCall(api: string, seconds: number): void {
    this.llmSeconds.observe({ api }, seconds);
  }
  move(): void {
    this.moves.inc();
  }
  /** Counts an ignored /process key. Clients choose the keys, so labels are bounded: odd or late-coming keys count as "other". */
  ignoredKey(key: string): void {
    const known = this.ignoredLabels.has(key) || (this.ignoredLabels.size < MAX_KEY_LABELS && /^[A-Za-z0-9_.-]{1,64}$/.test(key));
    if (known) this.ignoredLabels.add(key);
    this.ignored.inc({ key: known ? key : 'other' });
  }
  /** Prometheus text exposition. */
  async text(): Promise<string> {
    return (await this.registry.metrics()) + (await processMetrics().metrics());
  }
  get contentType(): string {
    return this.registry.contentType;
  }
}
