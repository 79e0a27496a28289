import type { ParsedToolCall } from './types.js';

/** One `<tool_call>` block of a model turn: a call, or why it could not be read. */
export type ToolCallParse = { call: ParsedToolCall; raw: string } | { error: string; raw: string };

const BLOCK = /<tool_call>([\s\S]*?)(<\/tool_call>|$)/g;

/** Deepest nesting of objects and arrays a tool call may have; real tools take a few levels. */
const MAX_CALL_DEPTH = 64;
/** Largest tool call, in characters (a file written through the editor fits easily). */
const MAX_CALL_CHARS = 1 << 20;

/**
 * Nesting depth of a JSON text, by one pass over its characters (strings skipped). Checked before
 * JSON.parse, because a value nested thousands deep parses but then breaks every recursive walk of
 * it afterwards (JSON.stringify throws past a few thousand levels).
 */
function jsonDepth(text: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92)
        i++; // backslash: skip the escaped character
      else if (c === 34) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 123 || c === 91) max = Math.max(max, ++depth);
    else if (c === 125 || c === 93) depth--;
  }
  return max;
}

/**
 * Parses every `<tool_call>{json}</tool_call>` block of a model turn, in order (Qwen3/Hermes
 * format: `{"name": ..., "arguments": {...}}`). Malformed blocks come back as errors with the
 * reason, never as exceptions, so the agent can answer them with an error observation.
 */
export function parseToolCalls(text: string): ToolCallParse[] {
  const out: ToolCallParse[] = [];
  for (const m of text.matchAll(BLOCK)) {
    const raw = m[1]!.trim();
    if (m[2] !== '</tool_call>') {
      out.push({ raw, error: 'the tool call is not closed with </tool_call>' });
      continue;
    }
    out.push(parseOne(raw));
  }
  return out;
}

function parseOne(raw: string): ToolCallParse {
  if (raw.length > MAX_CALL_CHARS)
    return { raw: raw.slice(0, 200), error: `the tool call is ${raw.length} characters long; at most ${MAX_CALL_CHARS} are read` };
  const depth = jsonDepth(raw);
  if (depth > MAX_CALL_DEPTH)
    return { raw: raw.slice(0, 200), error: `the tool call nests ${depth} levels deep; at most ${MAX_CALL_DEPTH} are read` };
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (err) {
    return { raw, error: `the tool call is not valid JSON (${(err as Error).message})` };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return { raw, error: 'the tool call must be a JSON object {"name": ..., "arguments": {...}}' };
  const v = value as Record<string, unknown>;
  if (typeof v.name !== 'string' || v.name === '') return { raw, error: 'the tool call has no "name" string' };
  // Some models emit the arguments as a JSON string, or under "parameters" (older Hermes prompts).
  let args = v.arguments ?? v.parameters ?? {};
  if (typeof args === 'string') {
    if (jsonDepth(args) > MAX_CALL_DEPTH)
      return { raw: raw.slice(0, 200), error: `the "arguments" of ${v.name} nest more than ${MAX_CALL_DEPTH} levels deep` };
    try {
      args = JSON.parse(args);
    } catch {
      return { raw, error: `the "arguments" of ${v.name} is a string that is not JSON` };
    }
  }
  if (typeof args !== 'object' || args === null || Array.isArray(args))
    return { raw, error: `the "arguments" of ${v.name} must be a JSON object` };
  return { raw, call: { name: v.name, arguments: args as Record<string, unknown> } };
}
