export { makeTokenizer, qwen3Tokenizer } from './tokenizer.js';
export type { Tokenizer, ChatMessage, ToolDefinition } from './tokenizer.js';
export { loadTokenizer } from './local.js';
export { auditDrift, modelTurns, roundTripDiff, viewsOfLine } from './drift.js';
export type { DriftReport, DriftExample, TokenView } from './drift.js';
export { hfHubCache, findInHfCache, locateTokenizer, resolveTokenizerSpec } from './resolve.js';
export type { TokenizerSource } from './resolve.js';
export { checkBackendTokenizer, assertTokenizerMatch, TokenizerGuard, TOKENIZER_PROBE } from './backend-check.js';
export type { TokenizerCheck } from './backend-check.js';
