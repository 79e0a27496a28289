import { z } from 'zod';
import { BackendInfo } from './llm.js';
import { GenerationStatus } from './pause.js';

/** One stage's pool: its slots now and those in use; an `auto` pool also gives its bounds (ours). */
const Pool = z.object({
  size: z.number().int(),
  busy: z.number().int(),
  mode: z.enum(['fixed', 'auto']).optional(),
  min: z.number().int().optional(),
  max: z.number().int().optional(),
  /** Why an auto pool has its size (its last sizing decision). */
  reason: z.string().optional(),
});

/** Counts of one tenant's jobs (its /status view and the admin's list). */
export const TenantStatus = z.object({
  name: z.string(),
  weight: z.number(),
  priority: z.number().int(),
  max_running: z.number().int().nullable(),
  max_queued: z.number().int().nullable(),
  jobs: z.number().int(),
  queued: z.number().int(),
  in_stage: z.number().int(),
  backends: z.number().int(),
});
export type TenantStatus = z.infer<typeof TenantStatus>;

/** What the whole server holds, shown to a tenant beside its own jobs. */
const FleetTotals = z.object({
  jobs: z.number().int(),
  queued: z.number().int(),
  in_stage: z.number().int(),
  queues: z.object({ init: z.number().int(), run: z.number().int(), eval: z.number().int() }),
  workers: z.object({ init: Pool, run: Pool, eval: Pool }),
  tenants: z.number().int(),
});

/**
 * GET /status answer (on a running server; a stopped one answers 503, as ProRL does). ProRL's keys
 * first, then ours.
 */
export const StatusResponse = z.looseObject({
  status: z.enum(['running', 'stopped', 'stopping', 'draining']),
  /** ProRL: /process calls not answered yet; here, jobs not finished. */
  pending_jobs: z.number().int(),
  /** ProRL: whether the server accepts jobs. */
  running: z.boolean(),
  /** Jobs not finished (queued or inside a stage). */
  jobs: z.number().int(),
  /** Jobs inside each stage. */
  init: z.number().int(),
  run: z.number().int(),
  eval: z.number().int(),
  // ours
  /** Jobs waiting in the three stage queues together. */
  queued: z.number().int(),
  /** Jobs inside a stage (init + run + eval). */
  in_stage: z.number().int(),
  queues: z.object({ init: z.number().int(), run: z.number().int(), eval: z.number().int() }),
  workers: z.object({ init: Pool, run: Pool, eval: Pool }),
  backends: z.array(BackendInfo),
  /** The sandbox isolation and limits in force (null when this server has no sandbox settings yet). */
  sandbox: z.record(z.string(), z.unknown()).nullable().optional(),
  /** Whether model calls are paused (POST /pause), calls in flight, jobs waiting for /resume. */
  generation: GenerationStatus.optional(),
  /** Multi-tenant servers: the tenant this view is of (its jobs and backends above)... */
  tenant: TenantStatus.optional(),
  /** ...and the server's totals beside them. */
  fleet: FleetTotals.optional(),
  /** The admin's view of a multi-tenant server: every tenant's counts. */
  tenants: z.array(TenantStatus).optional(),
});
export type StatusResponse = z.infer<typeof StatusResponse>;

/** Answer of /start, /stop, /clear_llm_server and /health. */
export const OkResponse = z.looseObject({ status: z.string() });
