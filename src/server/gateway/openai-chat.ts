import { ChatCompletionRequest } from '../../protocol/gateway.js';
import type { ToolDefinition } from '../../tokens/tokenizer.js';
import type { ApiAdapter, GatewayFailure, SseEvent } from './api.js';
import { parseArguments, textOf, type GwAnswer, type GwMessage, type ToolChoice } from './conversation.js';
import { pieces } from './sse.js';

/** OpenAI's finish reasons (openai-node v6.49.0 src/resources/chat/completions/completions.ts ChatCompletion.Choice). */
const FINISH = { stop: 'stop', length: 'length', tool_calls: 'tool_calls' } as const;

/** The error `type` OpenAI gives each kind of failure, and its `code`. */
export function openaiError(f: GatewayFailure): { error: { message: string; type: string; param: string | null; code: string | null } } {
  const type =
    f.kind === 'invalid_request' || f.kind === 'context_length'
      ? 'invalid_request_error'
      : f.kind === 'not_found'
        ? 'not_found_error'
        : f.kind === 'closed'
          ? 'invalid_request_error'
          : 'server_error';
  const code = f.kind === 'context_length' ? 'context_length_exceeded' : f.kind === 'closed' ? 'gateway_closed' : null;
  return { error: { message: f.message, type, param: f.param ?? null, code } };
}

/** A tool_choice of chat completions or the Responses API, in the gateway's terms. */
export function toolChoiceOf(v: unknown): ToolChoice {
  if (v === 'none' || v === 'required') return v;
  if (v && typeof v === 'object') {
    const o = v as { function?: { name?: unknown }; name?: unknown };
    const name = o.function?.name ?? o.name;
    if (typeof name === 'string') return { name };
  }
  return 'auto';
}

function stopList(stop: string | string[] | null | undefined): string[] | undefined {
  return stop === null || stop === undefined ? undefined : Array.isArray(stop) ? stop : [stop];
}

/** The assistant message of an answer, as chat completions carries it. */
function message(a: GwAnswer): Record<string, unknown> {
  return {
    role: 'assistant',
    content: a.text === '' && a.toolCalls.length > 0 ? null : a.text,
    ...(a.reasoning !== undefined ? { reasoning_content: a.reasoning } : {}),
    ...(a.toolCalls.length
      ? {
          tool_calls: a.toolCalls.map((c) => ({
            id: c.id,
            type: 'function',
            function: { name: c.name, arguments: JSON.stringify(c.arguments) },
          })),
        }
      : {}),
  };
}

function usage(a: GwAnswer): Record<string, unknown> {
  return {
    prompt_tokens: a.usage.prompt_tokens,
    completion_tokens: a.usage.completion_tokens,
    total_tokens: a.usage.prompt_tokens + a.usage.completion_tokens,
    prompt_tokens_details: { cached_tokens: a.usage.cached_tokens },
  };
}

/** OpenAI `POST /v1/chat/completions`, streamed or not. */
export const openaiChat: ApiAdapter<ChatCompletionRequest> = {
  api: 'chat',
  schema: ChatCompletionRequest,
  translate(body) {
    const messages: GwMessage[] = body.messages.map((m) => {
      if (m.role === 'assistant') {
        const calls = (m.tool_calls ?? []).map((c, i) => ({
          id: c.id ?? `call_${i}`,
          name: c.function.name,
          arguments: parseArguments(c.function.arguments),
        }));
        return { role: 'assistant', content: textOf(m.content), ...(calls.length ? { tool_calls: calls } : {}) };
      }
      if (m.role === 'tool' || m.role === 'function')
        return { role: 'tool', content: textOf(m.content), ...(m.tool_call_id ? { tool_call_id: m.tool_call_id } : {}) };
      return { role: m.role === 'developer' ? 'system' : m.role, content: textOf(m.content) };
    });
    const tools: ToolDefinition[] = (body.tools ?? [])
      .filter((t) => t.type === 'function')
      .map((t) => ({
        type: 'function',
        function: {
          name: t.function.name,
          description: t.function.description ?? '',
          parameters: t.function.parameters ?? { type: 'object', properties: {} },
        },
      }));
    return {
      api: 'chat',
      messages,
      tools,
      toolChoice: toolChoiceOf(body.tool_choice),
      asked: {
        model: body.model,
        ...(body.temperature != null ? { temperature: body.temperature } : {}),
        ...(body.top_p != null ? { top_p: body.top_p } : {}),
        ...((body.max_completion_tokens ?? body.max_tokens) != null
          ? { max_tokens: (body.max_completion_tokens ?? body.max_tokens)! }
          : {}),
        ...(stopList(body.stop) ? { stop: stopList(body.stop) } : {}),
        ...(body.tool_choice !== undefined ? { tool_choice: body.tool_choice } : {}),
        stream: body.stream === true,
      },
    };
  },
  streamed: (body) => body.stream === true,
  json(a, ctx) {
    return {
      id: ctx.id,
      object: 'chat.completion',
      created: ctx.created,
      model: ctx.model,
      choices: [{ index: 0, message: message(a), finish_reason: FINISH[a.finish], logprobs: null }],
      usage: usage(a),
    };
  },
  // The chunk sequence openai-node's ChatCompletionStream accumulates (src/lib/ChatCompletionStream.ts@v6.49.0):
  // the role first, content deltas, each tool call opened with its id, type and name and then its
  // arguments, the finish_reason, a usage chunk with empty choices when asked, then [DONE].
  events(a, ctx, body) {
    const base = { id: ctx.id, object: 'chat.completion.chunk', created: ctx.created, model: ctx.model };
    const chunk = (delta: Record<string, unknown>, finish: string | null = null): SseEvent => ({
      data: { ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] },
    });
    const out: SseEvent[] = [chunk({ role: 'assistant', content: '' })];
    if (a.reasoning) for (const p of pieces(a.reasoning)) out.push(chunk({ reasoning_content: p }));
    for (const p of pieces(a.text)) out.push(chunk({ content: p }));
    a.toolCalls.forEach((c, index) => {
      out.push(chunk({ tool_calls: [{ index, id: c.id, type: 'function', function: { name: c.name, arguments: '' } }] }));
      for (const p of pieces(JSON.stringify(c.arguments), 256)) out.push(chunk({ tool_calls: [{ index, function: { arguments: p } }] }));
    });
    out.push(chunk({}, FINISH[a.finish]));
    if (body.stream_options?.include_usage) out.push({ data: { ...base, choices: [], usage: usage(a) } });
    out.push({ data: '[DONE]' });
    return out;
  },
  error: openaiError,
  errorEvent: (f) => ({ data: openaiError(f) }),
};
