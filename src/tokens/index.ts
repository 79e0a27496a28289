export { makeTokenizer, qwen3Tokenizer } from './tokenizer.js';
export type { Tokenizer, ChatMessage, ToolDefinition } from './tokenizer.js';
