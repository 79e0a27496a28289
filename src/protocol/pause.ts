import { z } from 'zod';

/**
 * Pausing generation for co-located trainers (docs/api.md "POST /pause, POST /resume"): while
 * paused, a rollout server sends nothing to its LLM backends; jobs wait before their next model
 * call and continue after /resume.
 */

/** `drain`: calls already sent finish; `abort`: they are cut and continue after the resume. */
export const PauseMode = z.enum(['drain', 'abort']);
export type PauseMode = z.infer<typeof PauseMode>;

/** POST /pause body (and the fields of the coordinator's pause() and the sidecar's pause_generation). */
export const PauseRequest = z.strictObject({
  mode: PauseMode.default('drain'),
  /**
   * abort: how long a call the backend was asked to abort may take to come back with its partial
   * output before raas drops the connection (the turn then restarts from its last returned ids).
   */
  abort_grace_s: z.number().min(0).max(600).default(5),
});
export type PauseRequest = z.infer<typeof PauseRequest>;

/** POST /pause answer, sent once no call is in flight to any backend. */
export const PauseResponse = z.looseObject({
  status: z.literal('paused'),
  mode: PauseMode,
  /** Model calls in flight when the pause began. */
  in_flight: z.number().int(),
  /** abort: calls the backend cut and answered with their partial output (continued after /resume). */
  aborted: z.number().int(),
  /** abort: calls still running after abort_grace_s, dropped by raas (their partial output is lost). */
  disconnected: z.number().int(),
  /** Jobs now waiting for /resume before a model call. */
  held: z.number().int(),
});
export type PauseResponse = z.infer<typeof PauseResponse>;

/** POST /resume answer. */
export const ResumeResponse = z.looseObject({
  status: z.literal('running'),
  /** Jobs that were waiting and go on now. */
  released: z.number().int(),
});
export type ResumeResponse = z.infer<typeof ResumeResponse>;

/** `generation` in GET /status. */
export const GenerationStatus = z.object({
  paused: z.boolean(),
  mode: PauseMode.optional(),
  in_flight: z.number().int(),
  held: z.number().int(),
});
export type GenerationStatus = z.infer<typeof GenerationStatus>;
