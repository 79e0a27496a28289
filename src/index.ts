// Public library API of raas: named exports only (no `export *` of implementation modules).

export * as protocol from './protocol/index.js';
export { RaasError, CancelledError, TimeoutError, ContextLengthError, ERROR_CODES } from './protocol/errors.js';
export type { ErrorCode } from './protocol/errors.js';
export type { Batch, Group, Rollout, BatchStats, UpdateWeightsRequest } from './protocol/batch.js';
export type { ProcessRequest, Result, Message, Tokens, SamplingParams } from './protocol/process.js';
export { RAAS_VERSION } from './version.js';

// tokens
export { qwen3Tokenizer, makeTokenizer, loadTokenizer, auditDrift } from './tokens/index.js';
export type { Tokenizer, ChatMessage, ToolDefinition, DriftReport } from './tokens/index.js';

// rollout server
export {
  startRolloutServer,
  HandlerRegistry,
  builtinHandlers,
  loadHandlerModules,
  chatHandler,
  BackendPool,
  ServerConfig,
  loadServerConfig,
} from './server/index.js';
export type { RolloutServer, RolloutServerOptions, ServerConfigInput } from './server/index.js';
export type {
  AgentHandler,
  AdmissionEnv,
  StageContext,
  RunContext,
  EvalContext,
  InitResult,
  RunResult,
  EvalResult,
  Logger,
} from './server/handlers/types.js';
export type { LlmSession, GenerateRequest, GenerateResult } from './server/llm/types.js';

// agent and built-in task handlers
export { runAgent, parseToolCalls } from './server/agent/index.js';
export type { AgentOptions, AgentTrajectory, ToolExecutor, ToolOutcome, ParsedToolCall } from './server/agent/index.js';
export { firstMessages, runToolAgent, taskSchema } from './server/handlers/common/run.js';
export { toolDefinitions } from './server/handlers/common/tools.js';
export { sandboxExecutor } from './server/handlers/common/executor.js';
export { mathHandler, answersMatch, normaliseAnswer, lastBoxed } from './server/handlers/math/index.js';
export { codeHandler } from './server/handlers/code/index.js';
export { sweHandler } from './server/handlers/swe/index.js';

// sandboxes
export { createSandboxRuntime, SandboxConfig, LoopbackLeases, ImageCache } from './server/sandbox/index.js';
export type {
  SandboxConfigInput,
  Sandbox,
  SandboxRuntime,
  SandboxSpec,
  BashResult,
  PythonResult,
  EditOp,
  EditResult,
} from './server/sandbox/index.js';

// simulated backend
export { startSim, SimOptions } from './sim/index.js';
export type { SimHandle } from './sim/index.js';
export { loadPolicies } from './sim/policies/index.js';
export type { TaskScript, ScriptStep } from './sim/policies/custom.js';
export type { SimPolicy, PolicyContext, PolicyTurn } from './sim/policy.js';

// trainer side
export { RolloutClient, RolloutFleet } from './client/index.js';
export type { RolloutClientOptions, RolloutFleetOptions, FleetServerInfo, FleetStats, ProcessInput } from './client/index.js';
export { planPlacement, applyPlacement, place, formatPlan, loadPlaceConfig, PlaceConfig } from './placement/index.js';
export type { PlacementPlan, Lookup } from './placement/index.js';
export { Coordinator, loadTrainConfig, runEval, TrainConfig, CoordinatorState } from './dapo/index.js';
export type { CoordinatorOptions, CoordinatorStatus, TrainConfigInput, EvalReport } from './dapo/index.js';

// sidecar for Python trainers
export { runSidecar, serveStdio, SidecarSession, dapoBackend, StderrLog } from './sidecar/index.js';
export type { SidecarBackend, SidecarCoordinator, SidecarLog, RunSidecarOptions, ServeStdioOptions } from './sidecar/index.js';
