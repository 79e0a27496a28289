import { z } from 'zod';
import { BackendInfo } from './llm.js';
import { CriticalError, FinishReason, JobState } from './process.js';

/**
 * A job changed state (GET /events, `event: job`). Every transition of the job state machine is one
 * event; the terminal one also carries what the result says about the job's outcome.
 */
export const JobEvent = z.object({
  type: z.literal('job'),
  /** Wall-clock ms when the change happened. */
  at: z.number(),
  job_id: z.string(),
  state: JobState,
  /** The state it left (absent for the first event, `queued_init`). */
  from: JobState.optional(),
  data_source: z.string(),
  instance_id: z.union([z.string(), z.number()]).nullable(),
  group_id: z.string().optional(),
  /** The tenant the job belongs to, on a server with tenants. */
  tenant: z.string().optional(),
  // Terminal states only: the result's outcome.
  reward: z.number().optional(),
  critical_error: CriticalError.optional(),
  finish_reason: FinishReason.optional(),
  num_turns: z.number().int().optional(),
  filter: z.boolean().optional(),
  /** The result's `error`, cut to 500 characters. */
  error: z.string().nullable().optional(),
  /** Seconds queued and inside each stage. */
  timing: z.object({ queued_s: z.number(), init_s: z.number(), run_s: z.number(), eval_s: z.number() }).optional(),
});
export type JobEvent = z.infer<typeof JobEvent>;

const BACKEND_CHANGES = ['added', 'removed', 'unhealthy', 'healthy', 'weight_version'] as const;

/** An LLM backend was added, removed, marked unhealthy or healthy, or got a new weight_version (`event: backend`). */
export const BackendEvent = z.object({
  type: z.literal('backend'),
  at: z.number(),
  change: z.enum(BACKEND_CHANGES),
  backend: BackendInfo.extend({ last_error: z.string().nullable().optional() }),
  tenant: z.string().optional(),
});
export type BackendEvent = z.infer<typeof BackendEvent>;

/** One event of GET /events, as its `data:` line carries it. */
export const ServerEvent = z.discriminatedUnion('type', [JobEvent, BackendEvent]);
export type ServerEvent = z.infer<typeof ServerEvent>;

/**
 * Sent instead of the missed events when a client resumes (`Last-Event-ID`) from an event the
 * bounded buffer no longer holds, or when it fell too far behind: re-read the state (GET /status,
 * the console's snapshot) and go on from `last_event_id`.
 */
export const ResetEvent = z.object({
  reason: z.enum(['buffer_overrun', 'too_slow', 'unknown_id']),
  last_event_id: z.number().int(),
  /** The oldest event id the buffer still holds. */
  oldest_event_id: z.number().int(),
});
export type ResetEvent = z.infer<typeof ResetEvent>;
