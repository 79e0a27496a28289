export { makeTokenizer, qwen3Tokenizer } from './tokenizer.js';
export type { Tokenizer, ChatMessage, ToolDefinition } from './tokenizer.js';
export { loadTokenizer } from './local.js';
export { auditDrift, modelTurns } from './drift.js';
export type { DriftReport } from './drift.js';
