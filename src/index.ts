// Public library API: named exports only.
export * as protocol from './protocol/index.js';
export { RAAS_VERSION } from './version.js';
export { qwen3Tokenizer, makeTokenizer } from './tokens/index.js';
export type { Tokenizer, ChatMessage, ToolDefinition } from './tokens/index.js';
