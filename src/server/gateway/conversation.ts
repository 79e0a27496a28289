import type { ChatMessage, ToolDefinition } from '../../tokens/tokenizer.js';

/** A tool call in the gateway's own form: arguments parsed, id as the API carries it. */
interface GwToolCall {
  id: string;
  name: string;
  arguments: Record<string, unknown>;
}

/**
 * One message of a request, whatever API it came in (OpenAI chat, Responses, Anthropic): the
 * three are translated onto this one form, which is what prefix matching compares and what the
 * chat template renders.
 */
export interface GwMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  tool_calls?: GwToolCall[];
  tool_call_id?: string;
}

/** What the harness asked for in one call; recorded, and overridden by the trainer's sampling_params. */
export interface AskedSampling {
  model?: string;
  temperature?: number;
  top_p?: number;
  max_tokens?: number;
  stop?: string[];
  tool_choice?: unknown;
  stream?: boolean;
}

/** How the model may answer: tool calls allowed (auto, required, a named one) or not (none). */
export type ToolChoice = 'auto' | 'none' | 'required' | { name: string };

/** One API call translated: the whole conversation, the tools, and what the harness asked. */
export interface GwRequest {
  api: 'chat' | 'responses' | 'messages';
  messages: GwMessage[];
  tools: ToolDefinition[];
  toolChoice: ToolChoice;
  asked: AskedSampling;
}

/** Why a call's generation stopped, in the API-neutral words the adapters map onto their own. */
type GwFinish = 'stop' | 'length' | 'tool_calls';

/** The model's answer to one call, ready for any API's response shape. */
export interface GwAnswer {
  /** Visible text (reasoning and parsed tool-call blocks removed). */
  text: string;
  /** The `<think>` part, when the model wrote one. */
  reasoning?: string;
  toolCalls: GwToolCall[];
  finish: GwFinish;
  usage: { prompt_tokens: number; completion_tokens: number; cached_tokens: number };
  /** Index of the segment the call extended or opened. */
  segment: number;
}

/** Joins the text parts of a content value (string, null, or a list of parts) as vLLM does: with newlines. */
export function textOf(content: unknown): string {
  if (content === null || content === undefined) return '';
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return String(content);
  const parts: string[] = [];
  for (const p of content) {
    if (typeof p === 'string') parts.push(p);
    else if (p && typeof p === 'object') {
      const o = p as Record<string, unknown>;
      if (typeof o.text === 'string') parts.push(o.text);
      else if ('content' in o) parts.push(textOf(o.content));
    }
  }
  return parts.join('\n');
}

/** JSON with object keys sorted: two argument objects that differ only in key order compare equal. */
export function canonicalJson(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v) ?? 'null';
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  const o = v as Record<string, unknown>;
  return `{${Object.keys(o)
    .sort()
    .filter((k) => o[k] !== undefined)
    .map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`)
    .join(',')}}`;
}

/**
 * Arguments of a tool call as a harness echoes them: a JSON string (OpenAI), or an object
 * (Anthropic). A string that is not a JSON object is kept under `__raw` so it still renders and compares.
 */
export function parseArguments(args: unknown): Record<string, unknown> {
  if (args && typeof args === 'object' && !Array.isArray(args)) return args as Record<string, unknown>;
  if (typeof args !== 'string' || args.trim() === '') return {};
  try {
    const v: unknown = JSON.parse(args);
    if (v && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {
    /* kept raw below */
  }
  return { __raw: args };
}

/** Drops a `<think>…</think>` block a harness echoed back inside an assistant's content. */
function visible(content: string): string {
  const end = content.lastIndexOf('</think>');
  return (end >= 0 ? content.slice(end + '</think>'.length) : content).trim();
}

/**
 * Whether a message of a new request is the same as one the job already holds. An assistant
 * message compares by its visible text and its calls' names and arguments (not their ids, and not
 * the reasoning, which harnesses often drop): what the harness saw of the model's answer.
 */
export function sameMessage(a: GwMessage, b: GwMessage): boolean {
  if (a.role !== b.role) return false;
  if (a.role !== 'assistant') return a.content === b.content && (a.role !== 'tool' || (a.tool_call_id ?? '') === (b.tool_call_id ?? ''));
  if (visible(a.content) !== visible(b.content)) return false;
  const ca = a.tool_calls ?? [];
  const cb = b.tool_calls ?? [];
  if (ca.length !== cb.length) return false;
  return ca.every((c, i) => c.name === cb[i]!.name && canonicalJson(c.arguments) === canonicalJson(cb[i]!.arguments));
}

/** The message as the chat template takes it. */
export function toChatMessage(m: GwMessage): ChatMessage {
  const out: ChatMessage = { role: m.role, content: m.content };
  if (m.tool_calls?.length) out.tool_calls = m.tool_calls.map((c) => ({ name: c.name, arguments: c.arguments }));
  return out;
}
