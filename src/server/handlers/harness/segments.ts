import type { Message, Segment as SegmentView, Tokens } from '../../../protocol/process.js';
import type { GwMessage } from '../../gateway/conversation.js';
import type { JobGateway } from '../../gateway/engine.js';
import type { Segment } from '../../gateway/segments.js';

/** What a harness run leaves of its gateway: every segment, the main one's tokens and messages, the counters. */
export interface GatewayRecord {
  segments: SegmentView[];
  /** Index of the segment `tokens` is: the one with the most model turns (the harness's main conversation). */
  main: number;
  tokens: Tokens;
  messages: Message[];
  stats: {
    calls: number;
    segments: number;
    reused_tokens: number;
    retokenized_tokens: number;
    invalid_tool_calls: number;
    generated_tokens: number;
  };
  /** What the harness asked for on each call (the trainer's sampling_params decided). */
  asked: Array<Record<string, unknown>>;
  /** The last model turn of the main segment: the harness's final answer. */
  final_message: string;
}

function view(s: Segment): SegmentView {
  return {
    index: s.index,
    parent: s.parent,
    prompt_ids: s.prompt_ids,
    response_ids: s.response_ids,
    response_mask: s.response_mask,
    logprobs: s.logprobs,
    num_turns: s.weight_versions.length,
    weight_versions: s.weight_versions,
  };
}

function message(m: GwMessage): Message {
  return {
    role: m.role,
    content: m.content,
    ...(m.tool_calls?.length ? { tool_calls: m.tool_calls.map((c) => ({ name: c.name, arguments: c.arguments, id: c.id })) } : {}),
    ...(m.tool_call_id ? { tool_call_id: m.tool_call_id } : {}),
  };
}

/** The record of one job's gateway. */
export function gatewayRecord(g: JobGateway): GatewayRecord {
  const segs = g.book.segments;
  let main: Segment | undefined;
  for (const s of segs) if (!main || s.weight_versions.length > main.weight_versions.length) main = s;
  const last = main ? [...main.messages].reverse().find((m) => m.role === 'assistant') : undefined;
  return {
    segments: segs.map(view),
    main: main?.index ?? 0,
    tokens: main
      ? { prompt_ids: main.prompt_ids, response_ids: main.response_ids, response_mask: main.response_mask, logprobs: main.logprobs }
      : { prompt_ids: [], response_ids: [], response_mask: [], logprobs: [] },
    messages: main ? main.messages.map(message) : [],
    stats: {
      calls: g.calls.length,
      segments: segs.length,
      reused_tokens: g.calls.reduce((n, c) => n + c.reused_tokens, 0),
      retokenized_tokens: g.retokenized,
      invalid_tool_calls: g.invalidToolCalls,
      generated_tokens: g.generated,
    },
    asked: g.calls.map((c) => ({ api: c.api, segment: c.segment, kind: c.kind, ...c.asked, max_tokens_sent: c.max_tokens })),
    final_message: last?.content ?? '',
  };
}
