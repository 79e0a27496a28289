export { runAgent, AGENT_DEFAULTS } from './loop.js';
export { parseToolCalls } from './parse.js';
export type { ToolCallParse } from './parse.js';
export { TrajectoryBuilder } from './trajectory.js';
export type {
  AgentOptions,
  AgentTrajectory,
  AgentTurn,
  AgentTurnPart,
  ParsedToolCall,
  ToolExecutor,
  ToolOutcome,
  RunAgent,
} from './types.js';
