import { ResponsesRequest } from '../../protocol/gateway.js';
import type { ToolDefinition } from '../../tokens/tokenizer.js';
import type { AnswerContext, ApiAdapter, ApiState, SseEvent } from './api.js';
import { parseArguments, textOf, type GwAnswer, type GwMessage } from './conversation.js';
import { openaiError, toolChoiceOf } from './openai-chat.js';
import { pieces } from './sse.js';

type Item = Exclude<ResponsesRequest['input'], string>[number];

/** The input items as messages: function calls join the assistant message they follow, outputs become tool messages. */
function itemsToMessages(items: readonly Item[]): GwMessage[] {
  const out: GwMessage[] = [];
  for (const it of items) {
    const type = it.type ?? (it.role ? 'message' : undefined);
    if (type === 'message') {
      const role = it.role === 'developer' ? 'system' : it.role;
      if (role !== 'system' && role !== 'user' && role !== 'assistant') continue;
      out.push({ role, content: textOf(it.content) });
    } else if (type === 'function_call' || type === 'custom_tool_call') {
      const call = {
        id: it.call_id ?? '',
        name: it.name ?? '',
        arguments: type === 'function_call' ? parseArguments(it.arguments) : { input: (it as { input?: unknown }).input },
      };
      const last = out[out.length - 1];
      if (last?.role === 'assistant') last.tool_calls = [...(last.tool_calls ?? []), call];
      else out.push({ role: 'assistant', content: '', tool_calls: [call] });
    } else if (type === 'function_call_output' || type === 'custom_tool_call_output') {
      out.push({ role: 'tool', content: textOf(it.output), ...(it.call_id ? { tool_call_id: it.call_id } : {}) });
    }
    // reasoning items: the gateway keeps the sampled ids, so the summary a harness echoes is not needed.
  }
  return out;
}

/** The answer's output items, as a finished response lists them. */
function outputItems(a: GwAnswer, id: string): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  if (a.reasoning) out.push({ type: 'reasoning', id: `rs_${id}`, summary: [{ type: 'summary_text', text: a.reasoning }] });
  if (a.text !== '' || a.toolCalls.length === 0)
    out.push({
      type: 'message',
      id: `msg_${id}`,
      status: 'completed',
      role: 'assistant',
      content: [{ type: 'output_text', text: a.text, annotations: [], logprobs: [] }],
    });
  a.toolCalls.forEach((c, i) =>
    out.push({
      type: 'function_call',
      id: `fc_${id}_${i}`,
      call_id: c.id,
      name: c.name,
      arguments: JSON.stringify(c.arguments),
      status: 'completed',
    }),
  );
  return out;
}

function response(a: GwAnswer | undefined, ctx: AnswerContext, body: ResponsesRequest): Record<string, unknown> {
  const incomplete = a?.finish === 'length';
  return {
    id: ctx.id,
    object: 'response',
    created_at: ctx.created,
    status: a === undefined ? 'in_progress' : incomplete ? 'incomplete' : 'completed',
    error: null,
    incomplete_details: incomplete ? { reason: 'max_output_tokens' } : null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    model: ctx.model,
    output: a ? outputItems(a, ctx.id) : [],
    parallel_tool_calls: true,
    previous_response_id: body.previous_response_id ?? null,
    temperature: body.temperature ?? null,
    top_p: body.top_p ?? null,
    tool_choice: body.tool_choice ?? 'auto',
    tools: body.tools ?? [],
    text: { format: { type: 'text' } },
    metadata: {},
    usage: a
      ? {
          input_tokens: a.usage.prompt_tokens,
          input_tokens_details: { cached_tokens: a.usage.cached_tokens },
          output_tokens: a.usage.completion_tokens,
          output_tokens_details: { reasoning_tokens: 0 },
          total_tokens: a.usage.prompt_tokens + a.usage.completion_tokens,
        }
      : null,
  };
}

/** OpenAI `POST /v1/responses` (the API Codex speaks), streamed or not; `previous_response_id` reads the job's earlier answers. */
export const openaiResponses: ApiAdapter<ResponsesRequest> = {
  api: 'responses',
  schema: ResponsesRequest,
  translate(body, state: ApiState) {
    const earlier = body.previous_response_id ? (state.responses.get(body.previous_response_id) as GwMessage[] | undefined) : undefined;
    if (body.previous_response_id && !earlier)
      throw Object.assign(new Error(`previous_response_id: no response ${body.previous_response_id} in this job`), {
        param: 'previous_response_id',
      });
    const messages: GwMessage[] = [];
    if (body.instructions) messages.push({ role: 'system', content: body.instructions });
    const prior = (earlier ?? []).filter((m) => m.role !== 'system');
    messages.push(...prior);
    messages.push(...(typeof body.input === 'string' ? [{ role: 'user' as const, content: body.input }] : itemsToMessages(body.input)));
    const tools: ToolDefinition[] = (body.tools ?? [])
      .filter((t) => t.type === 'function' && t.name)
      .map((t) => ({
        type: 'function',
        function: { name: t.name!, description: t.description ?? '', parameters: t.parameters ?? { type: 'object', properties: {} } },
      }));
    return {
      api: 'responses',
      messages,
      tools,
      toolChoice: toolChoiceOf(body.tool_choice),
      asked: {
        model: body.model,
        ...(body.temperature != null ? { temperature: body.temperature } : {}),
        ...(body.top_p != null ? { top_p: body.top_p } : {}),
        ...(body.max_output_tokens != null ? { max_tokens: body.max_output_tokens } : {}),
        ...(body.tool_choice !== undefined ? { tool_choice: body.tool_choice } : {}),
        stream: body.stream === true,
      },
    };
  },
  streamed: (body) => body.stream === true,
  json: (a, ctx, body) => response(a, ctx, body),
  // The event sequence openai-node's ResponseStream accumulates (src/lib/responses/ResponseAccumulator.ts@v6.49.0).
  events(a, ctx, body) {
    const out: SseEvent[] = [];
    let seq = 0;
    const ev = (type: string, data: Record<string, unknown>): void =>
      void out.push({ name: type, data: { type, sequence_number: seq++, ...data } });
    ev('response.created', { response: response(undefined, ctx, body) });
    ev('response.in_progress', { response: response(undefined, ctx, body) });
    outputItems(a, ctx.id).forEach((item, output_index) => {
      const id = item.id as string;
      if (item.type === 'message') {
        const text = (item.content as Array<{ text: string }>)[0]!.text;
        ev('response.output_item.added', { output_index, item: { ...item, status: 'in_progress', content: [] } });
        const part = { type: 'output_text', text: '', annotations: [], logprobs: [] };
        ev('response.content_part.added', { item_id: id, output_index, content_index: 0, part });
        for (const p of pieces(text))
          ev('response.output_text.delta', { item_id: id, output_index, content_index: 0, delta: p, logprobs: [] });
        ev('response.output_text.done', { item_id: id, output_index, content_index: 0, text, logprobs: [] });
        ev('response.content_part.done', { item_id: id, output_index, content_index: 0, part: { ...part, text } });
      } else if (item.type === 'function_call') {
        ev('response.output_item.added', { output_index, item: { ...item, status: 'in_progress', arguments: '' } });
        for (const p of pieces(item.arguments as string, 256))
          ev('response.function_call_arguments.delta', { item_id: id, output_index, delta: p });
        ev('response.function_call_arguments.done', { item_id: id, output_index, name: item.name, arguments: item.arguments });
      } else ev('response.output_item.added', { output_index, item: { ...item, summary: [] } });
      ev('response.output_item.done', { output_index, item });
    });
    ev(a.finish === 'length' ? 'response.incomplete' : 'response.completed', { response: response(a, ctx, body) });
    return out;
  },
  error: openaiError,
  errorEvent: (f) => ({
    name: 'error',
    data: { type: 'error', code: openaiError(f).error.code, message: f.message, param: f.param ?? null, sequence_number: 0 },
  }),
  remember(_body, a, ctx, state, req) {
    const calls = a.toolCalls;
    state.responses.set(ctx.id, [...req.messages, { role: 'assistant', content: a.text, ...(calls.length ? { tool_calls: calls } : {}) }]);
  },
};
