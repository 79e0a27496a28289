export { ERROR_CODES, RaasError, CancelledError, TimeoutError, ContextLengthError, cancellationKind, fieldPath } from './errors.js';
export type { ErrorCode } from './errors.js';
export {
  TokenId,
  SamplingParams,
  Instance,
  JobId,
  ProcessRequest,
  ToolCall,
  Message,
  Span,
  Tokens,
  FINISH_REASONS,
  FinishReason,
  CriticalError,
  Timing,
  TurnRecord,
  Result,
  CancelRequest,
  CancelResponse,
  JOB_STATES,
  JobState,
  TERMINAL_STATES,
  JobResponse,
} from './process.js';
export { LlmApi, AddLlmServerRequest, RemoveLlmServerRequest, BackendInfo, LlmServersResponse } from './llm.js';
export { StatusResponse, OkResponse } from './status.js';
export { JobEvent, BackendEvent, ServerEvent, ResetEvent } from './events.js';
export { PauseMode, PauseRequest, PauseResponse, ResumeResponse, GenerationStatus } from './pause.js';
export { PrefetchRequest, PrefetchResponse } from './prefetch.js';
export { Rollout, Group, BatchStats, Batch, UpdateWeightsRequest } from './batch.js';
export {
  TASK_ALIASES,
  taskOf,
  aliasesOf,
  PromptMessage,
  MathInstance,
  CodeTest,
  CodeInstance,
  SweInstance,
  normaliseRow,
} from './tasks.js';
export {
  SIDECAR_PROTOCOL_VERSION,
  SIDECAR_LIMITS,
  SIDECAR_OPS,
  SIDECAR_EVENTS,
  SIDECAR_ERROR_CODES,
  SidecarId,
  SidecarEnvelope,
  SidecarRequest,
  SidecarAnswer,
  SidecarEvent,
  HelloResult,
  StepProgressEvent,
  WarningEvent,
  FatalEvent,
} from './sidecar.js';
export type { SidecarOp } from './sidecar.js';
