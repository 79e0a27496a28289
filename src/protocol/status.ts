import { z } from 'zod';
import { BackendInfo } from './llm.js';

const Pool = z.object({ size: z.number().int(), busy: z.number().int() });

/** GET /status answer. */
export const StatusResponse = z.looseObject({
  status: z.enum(['running', 'stopped', 'stopping']),
  pending_jobs: z.number().int(),
  running: z.number().int(),
  jobs: z.number().int(),
  init: z.number().int(),
  run: z.number().int(),
  eval: z.number().int(),
  queues: z.object({ init: z.number().int(), run: z.number().int(), eval: z.number().int() }),
  workers: z.object({ init: Pool, run: Pool, eval: Pool }),
  backends: z.array(BackendInfo),
  /** The sandbox isolation and limits in force (null when this server has no sandbox settings yet). */
  sandbox: z.record(z.string(), z.unknown()).nullable().optional(),
});
export type StatusResponse = z.infer<typeof StatusResponse>;

/** Answer of /start, /stop, /clear_llm_server and /health. */
export const OkResponse = z.looseObject({ status: z.string() });
