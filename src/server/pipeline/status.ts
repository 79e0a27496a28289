import type { StatusResponse, TenantStatus } from '../../protocol/status.js';
import type { Tenant } from '../tenants/tenant.js';
import { STAGES, type Job, type Stage } from './job.js';
import type { StageLimiter } from './limiter.js';

/** What status counts are taken from (the pipeline). */
export interface LiveJobs {
  readonly pools: Record<Stage, StageLimiter>;
  liveJobs(): Iterable<Job>;
  readonly liveTotal: number;
  queued(): number;
  sizing(s: Stage): { mode: 'fixed' | 'auto'; min?: number; max?: number; reason?: string };
}

type Counts = Pick<StatusResponse, 'pending_jobs' | 'jobs' | 'init' | 'run' | 'eval' | 'queued' | 'in_stage' | 'queues' | 'workers'>;

function inStage(p: LiveJobs, tenant?: Tenant): Record<Stage, number> {
  const n = { init: 0, run: 0, eval: 0 };
  for (const j of p.liveJobs())
    if ((!tenant || j.tenant === tenant) && (j.state === 'init' || j.state === 'run' || j.state === 'eval')) n[j.state]++;
  return n;
}

function pool(p: LiveJobs, s: Stage, size: number, busy: number, cap = Number.POSITIVE_INFINITY): StatusResponse['workers']['init'] {
  const m = p.sizing(s);
  const c = (x: number): number => Math.min(x, cap);
  return m.mode === 'auto'
    ? { size: c(size), busy, mode: 'auto', min: c(m.min ?? 1), max: c(m.max ?? size), reason: m.reason }
    : { size: c(size), busy };
}

/** The whole server's counts (the /status of a server without tenants, and the admin's). */
export function fleetStatus(p: LiveJobs): Counts {
  const n = inStage(p);
  const l = p.pools;
  return {
    pending_jobs: p.liveTotal,
    jobs: p.liveTotal,
    ...n,
    queued: p.queued(),
    in_stage: n.init + n.run + n.eval,
    queues: { init: l.init.depth, run: l.run.depth, eval: l.eval.depth },
    workers: Object.fromEntries(STAGES.map((s) => [s, pool(p, s, l[s].size, l[s].busy)])) as StatusResponse['workers'],
  };
}

/**
 * One tenant's view: its own jobs in ProRL's keys (so a trainer reads its own load), the slots it
 * may use (a stage's size, capped by its max_running), and the server's totals for comparison.
 */
export function tenantStatus(
  p: LiveJobs,
  t: Tenant,
): { view: Counts; summary: TenantStatus; totals: Omit<Counts, 'pending_jobs' | 'init' | 'run' | 'eval'> } {
  const n = inStage(p, t);
  const l = p.pools;
  const view: Counts = {
    pending_jobs: t.live,
    jobs: t.live,
    ...n,
    queued: t.queued,
    in_stage: n.init + n.run + n.eval,
    queues: { init: l.init.depthOf(t), run: l.run.depthOf(t), eval: l.eval.depthOf(t) },
    workers: Object.fromEntries(STAGES.map((s) => [s, pool(p, s, l[s].size, n[s], t.maxInStage)])) as StatusResponse['workers'],
  };
  const all = fleetStatus(p);
  return {
    view,
    summary: {
      name: t.name,
      weight: t.weight,
      priority: t.priority,
      max_running: Number.isFinite(t.maxInStage) ? t.maxInStage : null,
      max_queued: Number.isFinite(t.maxQueued) ? t.maxQueued : null,
      jobs: t.live,
      queued: t.queued,
      in_stage: view.in_stage,
      backends: t.pool.size,
    },
    totals: { jobs: all.jobs, queued: all.queued, in_stage: all.in_stage, queues: all.queues, workers: all.workers },
  };
}
