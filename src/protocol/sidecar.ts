import { z } from 'zod';
import { UpdateWeightsRequest } from './batch.js';
import { PauseRequest } from './pause.js';

/**
 * The JSON-lines protocol of `raas sidecar` (docs/sidecar.md). One request per stdin line, one
 * answer per request on stdout with the same `id`, events without an `id`. Requests are flat:
 * an op's fields sit beside `id` and `op`.
 */

/** Bumped on any incompatible change of the line protocol; `hello` reports it. */
export const SIDECAR_PROTOCOL_VERSION = 1;

/** Default size limits (bytes); `raas sidecar --max-line-bytes` changes the request limit. */
export const SIDECAR_LIMITS = {
  /** A request line longer than this is discarded and answered with `line_too_long`. */
  max_line_bytes: 64 * 1024 * 1024,
  /** Longest request id (string ids). */
  max_id_length: 256,
} as const;

/** A request id: a string or an integer, echoed back in the answer. */
export const SidecarId = z.union([z.string().min(1).max(SIDECAR_LIMITS.max_id_length), z.number().int()]);
export type SidecarId = z.infer<typeof SidecarId>;

/** The ops a sidecar serves, in the order docs/sidecar.md lists them. */
export const SIDECAR_OPS = [
  'hello',
  'next_batch',
  'update_weights',
  'pause_generation',
  'resume_generation',
  'status',
  'checkpoint',
  'resume',
  'eval',
  'shutdown',
] as const;
export type SidecarOp = (typeof SIDECAR_OPS)[number];

/** What every request line must have before its op's own fields are read. */
export const SidecarEnvelope = z.looseObject({ id: SidecarId, op: z.string().min(1).max(64) });

const Base = { id: SidecarId };

/** `hello`: handshake; the client may name itself. */
const HelloRequest = z.strictObject({
  ...Base,
  op: z.literal('hello'),
  client: z.string().max(256).optional(),
  protocol_version: z.number().int().positive().optional(),
});
/** `next_batch`: the next step's batch; `timeout_s` bounds the wait (answer `timeout`). */
const NextBatchRequest = z.strictObject({
  ...Base,
  op: z.literal('next_batch'),
  timeout_s: z
    .number()
    .positive()
    .max(7 * 24 * 3600)
    .optional(),
});
/** `update_weights`: the fields of UpdateWeightsRequest beside id/op. */
const UpdateWeightsOpRequest = z.strictObject({ ...Base, op: z.literal('update_weights'), ...UpdateWeightsRequest.shape });
/** `pause_generation`: the fields of PauseRequest (`mode`, `abort_grace_s`) beside id/op. */
const PauseGenerationRequest = z.strictObject({ ...Base, op: z.literal('pause_generation'), ...PauseRequest.shape });
const ResumeGenerationRequest = z.strictObject({ ...Base, op: z.literal('resume_generation') });
const StatusRequest = z.strictObject({ ...Base, op: z.literal('status') });
const CheckpointRequest = z.strictObject({ ...Base, op: z.literal('checkpoint') });
/** `resume`: `state` is what `checkpoint` answered (opaque JSON). */
const ResumeRequest = z.strictObject({ ...Base, op: z.literal('resume'), state: z.record(z.string(), z.unknown()) });
/** `eval`: one pass over a dataset, as `raas eval`; fields override the config's `eval` section. */
const EvalRequest = z.strictObject({
  ...Base,
  op: z.literal('eval'),
  dataset: z.looseObject({ path: z.string().min(1) }).optional(),
  n: z.number().int().positive().optional(),
  output: z.string().min(1).optional(),
});
/**
 * `shutdown`: `cancel` says whether the coordinator cancels its jobs in flight. Default: false once
 * the session took a `checkpoint` or `resume`d (a resume may follow and re-attaches to them), else true.
 */
const ShutdownRequest = z.strictObject({ ...Base, op: z.literal('shutdown'), cancel: z.boolean().optional() });

/** Any valid request, by op. */
export const SidecarRequest = z.discriminatedUnion('op', [
  HelloRequest,
  NextBatchRequest,
  UpdateWeightsOpRequest,
  PauseGenerationRequest,
  ResumeGenerationRequest,
  StatusRequest,
  CheckpointRequest,
  ResumeRequest,
  EvalRequest,
  ShutdownRequest,
]);
export type SidecarRequest = z.infer<typeof SidecarRequest>;

/** The `error` of a failed answer; `code` is a key of ERROR_CODES. */
const SidecarErrorBody = z.object({ code: z.string(), message: z.string() });

/** An answer: `{id, ok: true, result}` or `{id, ok: false, error}`; `id` is null when the line had none readable. */
export const SidecarAnswer = z.discriminatedUnion('ok', [
  z.object({ id: SidecarId, ok: z.literal(true), result: z.unknown() }),
  z.object({ id: SidecarId.nullable(), ok: z.literal(false), error: SidecarErrorBody }),
]);
export type SidecarAnswer = z.infer<typeof SidecarAnswer>;

/** `hello` result. */
export const HelloResult = z.object({
  protocol_version: z.number().int(),
  raas_version: z.string(),
  ops: z.array(z.string()),
  events: z.array(z.string()),
  capabilities: z.array(z.string()),
  batch_size: z.number().int(),
  group_size: z.number().int(),
  /** The config's run name. */
  name: z.string().optional(),
  limits: z.object({ max_line_bytes: z.number().int() }),
});
export type HelloResult = z.infer<typeof HelloResult>;

/** Progress while a `next_batch` waits: `request_id` names that request. */
export const StepProgressEvent = z.object({
  event: z.literal('step_progress'),
  data: z.looseObject({ request_id: SidecarId, elapsed_s: z.number() }),
});
/** Something the trainer should know that is not an answer (a stray stdout write, a slow close). */
export const WarningEvent = z.object({ event: z.literal('warning'), data: z.looseObject({ message: z.string() }) });
/** Written once before the sidecar exits non-zero at start (bad config); no answer follows. */
export const FatalEvent = z.object({ event: z.literal('fatal'), data: z.object({ code: z.string(), message: z.string() }) });
export const SidecarEvent = z.discriminatedUnion('event', [StepProgressEvent, WarningEvent, FatalEvent]);
export type SidecarEvent = z.infer<typeof SidecarEvent>;
export const SIDECAR_EVENTS = ['step_progress', 'warning', 'fatal'] as const;

/**
 * The error codes sidecar answers carry (all in ERROR_CODES); docs/sidecar.md documents each and a
 * test keeps both in sync. The first five come from the protocol itself, the rest from the ops.
 */
export const SIDECAR_ERROR_CODES = [
  'parse_error',
  'bad_request',
  'unknown_op',
  'line_too_long',
  'not_ready',
  'cancelled',
  'timeout',
  'config_invalid',
  'dataset_exhausted',
  'generation_paused',
  'server_unreachable',
  'no_llm_backends',
  'backend_unavailable',
  'internal',
] as const;
