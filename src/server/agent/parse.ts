import type { ParsedToolCall } from './types.js';

/** One `<tool_call>` block of a model turn: a call, or why it could not be read. */
export type ToolCallParse = { call: ParsedToolCall; raw: string } | { error: string; raw: string };

const BLOCK = /<tool_call>([\s\S]*?)(<\/tool_call>|$)/g;

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
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (err) {
    return { raw, error: `the tool call is not valid JSON (${(err as Error).message})` };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { raw, error: 'the tool call must be a JSON object {"name": ..., "arguments": {...}}' };
  const v = value as Record<string, unknown>;
  if (typeof v.name !== 'string' || v.name === '') return { raw, error: 'the tool call has no "name" string' };
  // Some models emit the arguments as a JSON string, or under "parameters" (older Hermes prompts).
  let args = v.arguments ?? v.parameters ?? {};
  if (typeof args === 'string') {
    try {
      args = JSON.parse(args);
    } catch {
      return { raw, error: `the "arguments" of ${v.name} is a string that is not JSON` };
    }
  }
  if (typeof args !== 'object' || args === null || Array.isArray(args)) return { raw, error: `the "arguments" of ${v.name} must be a JSON object` };
  return { raw, call: { name: v.name, arguments: args as Record<string, unknown> } };
}
