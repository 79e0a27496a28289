import type { Message, Tokens, FinishReason, SamplingParams } from '../../protocol/process.js';
import type { ChatMessage, Tokenizer, ToolDefinition } from '../../tokens/tokenizer.js';
import type { LlmSession } from '../llm/types.js';

/** A parsed tool call from the model's text (`<tool_call>{json}</tool_call>`). */
export interface ParsedToolCall {
  name: string;
  arguments: Record<string, unknown>;
}

/** What a tool returns to the agent: the observation text, and whether the trajectory ends. */
export interface ToolOutcome {
  observation: string;
  /** True for `finish`: the loop stops with finish_reason "finish" after this call. */
  finish?: boolean;
}

/** Runs one tool call; the agent turns thrown errors into error observations. */
export type ToolExecutor = (call: ParsedToolCall, signal: AbortSignal) => Promise<ToolOutcome>;

export interface AgentOptions {
  llm: LlmSession;
  tokenizer: Tokenizer;
  /** First prompt: system (tool definitions are added by the template) and user messages. */
  messages: ChatMessage[];
  /**
   * The first prompt's ids when the caller already has them (the n rollouts of a group share one
   * prompt): must equal `tokenizer.renderPrompt(messages, {tools, enableThinking})`.
   */
  promptIds?: number[];
  tools: ToolDefinition[];
  execute: ToolExecutor;
  samplingParams: SamplingParams;
  signal: AbortSignal;
  /** Defaults when sampling_params is silent. */
  defaults?: { max_iterations?: number; max_tokens_per_turn?: number; max_response_tokens?: number };
  /**
   * A model turn without any `<tool_call>`: return a user message to send next (a chat handler's
   * next question, or a nudge to use the tools), or undefined to end with finish_reason "finish"
   * (the default: the turn is the final answer, as for a chat model).
   */
  onNoToolCall?: (text: string, turn: number) => string | undefined;
}

/** One backend call of a turn; a turn the backend aborted (weight update) has several parts. */
export interface AgentTurnPart {
  backend: string;
  weight_version: string;
  /** Ids this call generated. */
  tokens: number;
  finish_reason: 'stop' | 'length' | 'abort';
}

/** One model turn: the backend and weight version when it started, and every call that produced it. */
export interface AgentTurn {
  backend: string;
  weight_version: string;
  parts: AgentTurnPart[];
}

/** What the agent loop produces: ProRL's messages, the token view, and why it stopped. */
export interface AgentTrajectory {
  messages: Message[];
  tokens: Tokens;
  finish_reason: FinishReason;
  num_turns: number;
  /** Arguments of the `finish` call, if any (the final answer). */
  final?: Record<string, unknown>;
  /** Last assistant text (for handlers whose answer is in the text, like \boxed{}). */
  last_text: string;
  /** Per model turn: backend, weight version and the parts of continued (aborted) turns. */
  turns: AgentTurn[];
  /** Per model turn, the weight version when it started (the Result's `weight_versions`). */
  weight_versions: string[];
  /** Number of tool calls that could not be parsed (each got an error observation). */
  malformed_tool_calls: number;
}
