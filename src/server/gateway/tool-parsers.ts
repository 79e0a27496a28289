import { RaasError } from '../../protocol/errors.js';
import { parseToolCalls } from '../agent/parse.js';
import type { ToolDefinition } from '../../tokens/tokenizer.js';

/** A tool call read from the model's text, before the gateway gives it an id. */
interface ParsedCall {
  name: string;
  arguments: Record<string, unknown>;
}

/** What a parser makes of one model turn's visible text. */
interface ParsedOutput {
  /** Text for the API's content: the text before the first call, or the whole text when a call did not parse. */
  content: string;
  calls: ParsedCall[];
  /** Call blocks that did not parse (their text stays in `content`). */
  invalid: number;
}

/** Reads tool calls out of a model family's output format. */
export interface ToolCallParser {
  readonly name: string;
  parse(text: string, tools: readonly ToolDefinition[]): ParsedOutput;
}

/**
 * Qwen3 / Hermes: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks. As vLLM's
 * hermes parser does, the content is the text before the first block
 * (vllm/entrypoints/openai/tool_parsers/hermes_tool_parser.py@v0.11.0:extract_tool_calls); unlike
 * it, a turn with any block that does not parse gives no calls at all and keeps its whole text,
 * counted, so a harness never runs half of what the model wrote.
 */
const hermes: ToolCallParser = {
  name: 'hermes',
  parse(text) {
    const at = text.indexOf('<tool_call>');
    if (at < 0) return { content: text, calls: [], invalid: 0 };
    const blocks = parseToolCalls(text);
    const bad = blocks.filter((b) => 'error' in b).length;
    if (bad > 0) return { content: text, calls: [], invalid: bad };
    return {
      content: text.slice(0, at).trim(),
      calls: blocks.flatMap((b) => ('call' in b ? [{ name: b.call.name, arguments: b.call.arguments }] : [])),
      invalid: 0,
    };
  },
};

const XML_CALL = /<tool_call>\s*<function=([^>\s]+)>([\s\S]*?)<\/function>\s*<\/tool_call>/g;
const XML_PARAM = /<parameter=([^>\s]+)>\n?([\s\S]*?)\n?<\/parameter>/g;

/**
 * Qwen3-Coder: `<tool_call><function=NAME><parameter=KEY>value</parameter>…</function></tool_call>`.
 * A parameter whose schema type is not a string is read as JSON when it parses (numbers, lists,
 * objects), as vLLM's qwen3_coder parser converts by the tool's schema.
 */
const qwen3Coder: ToolCallParser = {
  name: 'qwen3_coder',
  parse(text, tools) {
    const at = text.indexOf('<tool_call>');
    if (at < 0) return { content: text, calls: [], invalid: 0 };
    const opened = text.split('<tool_call>').length - 1;
    const calls: ParsedCall[] = [];
    for (const m of text.matchAll(XML_CALL)) {
      const name = m[1]!;
      const props = (
        tools.find((t) => t.function.name === name)?.function.parameters as { properties?: Record<string, { type?: unknown }> }
      )?.properties;
      const args: Record<string, unknown> = {};
      for (const p of m[2]!.matchAll(XML_PARAM)) {
        const key = p[1]!;
        const raw = p[2]!;
        args[key] = props?.[key]?.type === 'string' || props?.[key] === undefined ? raw : jsonOr(raw);
      }
      calls.push({ name, arguments: args });
    }
    if (calls.length !== opened) return { content: text, calls: [], invalid: opened - calls.length };
    return { content: text.slice(0, at).trim(), calls, invalid: 0 };
  },
};

function jsonOr(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

/** Parsers by name (vLLM's `--tool-call-parser` names); `handlers.harness.tool_parser` picks one. */
const PARSERS: ReadonlyMap<string, ToolCallParser> = new Map([
  ['hermes', hermes],
  ['qwen3', hermes],
  ['qwen3_coder', qwen3Coder],
]);

/** The parser of a name; an unknown name throws `config_invalid` naming the choices. */
export function toolParser(name: string): ToolCallParser {
  const p = PARSERS.get(name);
  if (!p)
    throw new RaasError(
      'config_invalid',
      `handlers.harness.tool_parser: no parser ${JSON.stringify(name)}; choose one of ${[...PARSERS.keys()].join(', ')}`,
    );
  return p;
}

/**
 * Splits Qwen3's reasoning from the answer as vLLM's qwen3 reasoning parser does: what precedes
 * `</think>` is reasoning (an opening `<think>` dropped); a `<think>` never closed (the turn was cut)
 * is all reasoning.
 */
export function splitReasoning(text: string): { reasoning?: string; content: string } {
  const end = text.indexOf('</think>');
  if (end < 0) {
    if (text.trimStart().startsWith('<think>')) return { reasoning: text.trimStart().slice('<think>'.length).trim(), content: '' };
    return { content: text };
  }
  const reasoning = text
    .slice(0, end)
    .replace(/^\s*<think>/, '')
    .trim();
  return { reasoning, content: text.slice(end + '</think>'.length).trim() };
}
