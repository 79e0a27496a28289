import { z } from 'zod';
import { BackendInfo } from './llm.js';
import { GenerationStatus } from './pause.js';

const Pool = z.object({ size: z.number().int(), busy: z.number().int() });

/**
 * GET /status answer (on a running server; a stopped one answers 503, as ProRL does). ProRL's keys
 * first, then ours.
 */
export const StatusResponse = z.looseObject({
  status: z.enum(['running', 'stopped', 'stopping']),
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
});
export type StatusResponse = z.infer<typeof StatusResponse>;

/** Answer of /start, /stop, /clear_llm_server and /health. */
export const OkResponse = z.looseObject({ status: z.string() });
