export { runAgent } from './loop.js';
export { parseToolCalls } from './parse.js';
export type {
  AgentOptions,
  AgentTrajectory,
  ParsedToolCall,
  ToolExecutor,
  ToolOutcome,
} from './types.js';
