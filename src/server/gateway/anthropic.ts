import { MessagesRequest } from '../../protocol/gateway.js';
import type { ToolDefinition } from '../../tokens/tokenizer.js';
import type { ApiAdapter, GatewayFailure, SseEvent } from './api.js';
import { parseArguments, textOf, type GwAnswer, type GwMessage, type ToolChoice } from './conversation.js';
import { pieces } from './sse.js';

/** Anthropic's stop reasons (anthropic-sdk-typescript sdk-v0.71.2 src/resources/messages/messages.ts StopReason). */
const STOP = { stop: 'end_turn', length: 'max_tokens', tool_calls: 'tool_use' } as const;

/** Anthropic's error shape: `{type: "error", error: {type, message}}` with its error types. */
function anthropicError(f: GatewayFailure): { type: 'error'; error: { type: string; message: string } } {
  const type =
    f.kind === 'invalid_request' || f.kind === 'closed' || f.kind === 'context_length'
      ? 'invalid_request_error'
      : f.kind === 'not_found'
        ? 'not_found_error'
        : f.kind === 'backend'
          ? 'overloaded_error'
          : 'api_error';
  // Claude Code reads "prompt is too long" as the signal to compact its history.
  const message = f.kind === 'context_length' ? `prompt is too long: ${f.message}` : f.message;
  return { type: 'error', error: { type, message } };
}

function toolChoiceOf(v: unknown): ToolChoice {
  const o = (v ?? {}) as { type?: unknown; name?: unknown };
  if (o.type === 'none') return 'none';
  if (o.type === 'any') return 'required';
  if (o.type === 'tool' && typeof o.name === 'string') return { name: o.name };
  return 'auto';
}

type Block = Exclude<MessagesRequest['messages'][number]['content'], string>[number];

/** A user message's blocks: each tool_result a tool message (in order), the text one user message after them. */
function userMessages(content: string | Block[]): GwMessage[] {
  if (typeof content === 'string') return [{ role: 'user', content }];
  const out: GwMessage[] = [];
  const text: string[] = [];
  for (const b of content) {
    if (b.type === 'tool_result') {
      const err = (b as { is_error?: unknown }).is_error === true;
      out.push({
        role: 'tool',
        content: `${err ? 'Error: ' : ''}${textOf(b.content)}`,
        ...(b.tool_use_id ? { tool_call_id: b.tool_use_id } : {}),
      });
    } else if (b.type === 'text') text.push(b.text ?? '');
    else if (b.type === 'image' || b.type === 'document') text.push(`[${b.type} omitted]`);
  }
  if (text.length) out.push({ role: 'user', content: text.join('\n') });
  return out;
}

function assistantMessage(content: string | Block[]): GwMessage {
  if (typeof content === 'string') return { role: 'assistant', content };
  const text = content.filter((b) => b.type === 'text').map((b) => b.text ?? '');
  const calls = content
    .filter((b) => b.type === 'tool_use')
    .map((b, i) => ({ id: b.id ?? `toolu_${i}`, name: b.name ?? '', arguments: parseArguments(b.input) }));
  return { role: 'assistant', content: text.join('\n'), ...(calls.length ? { tool_calls: calls } : {}) };
}

/** The answer's content blocks, in the order Anthropic gives them: thinking, text, tool uses. */
function blocks(a: GwAnswer): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  if (a.reasoning) out.push({ type: 'thinking', thinking: a.reasoning, signature: '' });
  if (a.text !== '' || a.toolCalls.length === 0) out.push({ type: 'text', text: a.text });
  for (const c of a.toolCalls) out.push({ type: 'tool_use', id: c.id, name: c.name, input: c.arguments });
  return out;
}

/** The request as a GwRequest (shared by /v1/messages and /v1/messages/count_tokens). */
export function translateMessages(body: MessagesRequest): { messages: GwMessage[]; tools: ToolDefinition[] } {
  const messages: GwMessage[] = [];
  const system = typeof body.system === 'string' ? body.system : textOf(body.system ?? []);
  if (system) messages.push({ role: 'system', content: system });
  for (const m of body.messages) {
    if (m.role === 'user') messages.push(...userMessages(m.content));
    else if (m.role === 'system') messages.push({ role: 'system', content: textOf(m.content) });
    else messages.push(assistantMessage(m.content));
  }
  // Server tools (web search, code execution: a `type` and no input_schema) cannot run in a sandbox without network.
  const tools: ToolDefinition[] = (body.tools ?? [])
    .filter((t) => t.input_schema)
    .map((t) => ({ type: 'function', function: { name: t.name, description: t.description ?? '', parameters: t.input_schema! } }));
  return { messages, tools };
}

/** Anthropic `POST /v1/messages`, streamed or not. */
export const anthropicMessages: ApiAdapter<MessagesRequest> = {
  api: 'messages',
  schema: MessagesRequest,
  check: (body) =>
    body.max_tokens === undefined
      ? { status: 400, kind: 'invalid_request', message: 'max_tokens: Field required', param: 'max_tokens' }
      : undefined,
  translate(body) {
    const { messages, tools } = translateMessages(body);
    return {
      api: 'messages',
      messages,
      tools,
      toolChoice: toolChoiceOf(body.tool_choice),
      asked: {
        model: body.model,
        ...(body.temperature != null ? { temperature: body.temperature } : {}),
        ...(body.top_p != null ? { top_p: body.top_p } : {}),
        ...(body.max_tokens !== undefined ? { max_tokens: body.max_tokens } : {}),
        ...(body.stop_sequences?.length ? { stop: body.stop_sequences } : {}),
        ...(body.tool_choice !== undefined ? { tool_choice: body.tool_choice } : {}),
        stream: body.stream === true,
      },
    };
  },
  streamed: (body) => body.stream === true,
  json(a, ctx) {
    return {
      id: ctx.id,
      type: 'message',
      role: 'assistant',
      model: ctx.model,
      content: blocks(a),
      stop_reason: STOP[a.finish],
      stop_sequence: null,
      usage: {
        input_tokens: a.usage.prompt_tokens - a.usage.cached_tokens,
        cache_read_input_tokens: a.usage.cached_tokens,
        cache_creation_input_tokens: 0,
        output_tokens: a.usage.completion_tokens,
      },
    };
  },
  // The event sequence the SDK's MessageStream accumulates (src/lib/MessageStream.ts@sdk-v0.71.2:436-490).
  events(a, ctx) {
    const out: SseEvent[] = [];
    const ev = (name: string, data: Record<string, unknown>): void => void out.push({ name, data: { type: name, ...data } });
    ev('message_start', {
      message: {
        id: ctx.id,
        type: 'message',
        role: 'assistant',
        model: ctx.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: {
          input_tokens: a.usage.prompt_tokens - a.usage.cached_tokens,
          cache_read_input_tokens: a.usage.cached_tokens,
          cache_creation_input_tokens: 0,
          output_tokens: 1,
        },
      },
    });
    blocks(a).forEach((b, index) => {
      if (b.type === 'thinking') {
        ev('content_block_start', { index, content_block: { type: 'thinking', thinking: '', signature: '' } });
        for (const p of pieces(String(b.thinking))) ev('content_block_delta', { index, delta: { type: 'thinking_delta', thinking: p } });
      } else if (b.type === 'text') {
        ev('content_block_start', { index, content_block: { type: 'text', text: '' } });
        for (const p of pieces(String(b.text))) ev('content_block_delta', { index, delta: { type: 'text_delta', text: p } });
      } else {
        ev('content_block_start', { index, content_block: { type: 'tool_use', id: b.id, name: b.name, input: {} } });
        for (const p of pieces(JSON.stringify(b.input), 256))
          ev('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: p } });
      }
      ev('content_block_stop', { index });
    });
    ev('message_delta', {
      delta: { stop_reason: STOP[a.finish], stop_sequence: null },
      usage: { output_tokens: a.usage.completion_tokens },
    });
    ev('message_stop', {});
    return out;
  },
  error: anthropicError,
  errorEvent: (f) => ({ name: 'error', data: anthropicError(f) }),
};
