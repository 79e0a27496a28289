import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Segment } from '../../src/server/gateway/segments.js';
import { call, scriptPolicy } from '../agent/script-policy.js';
import { startRig, type GatewayRig } from './helpers.js';

const policy = scriptPolicy({
  edit: [`I will write the file.\n${call('write_file', { path: 'a.txt', content: 'hi' })}`, 'The file is written.'],
  two: [`${call('read', { path: 'x' })}\n${call('read', { path: 'y' })}`, 'Both read.'],
  broken: ['<tool_call>{"name": "read", "arguments": {oops}}</tool_call>'],
  plain: ['Just text.'],
});

const TOOLS_OPENAI = [
  {
    type: 'function' as const,
    function: {
      name: 'write_file',
      description: 'Write a file',
      parameters: { type: 'object', properties: { path: { type: 'string' }, content: { type: 'string' } } },
    },
  },
  {
    type: 'function' as const,
    function: { name: 'read', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } } } },
  },
];

/** The runs of mask-1 ids of a segment: one per model turn generated in it. */
function generatedRuns(seg: Segment): number[][] {
  const runs: number[][] = [];
  seg.response_mask.forEach((m, i) => {
    if (m === 1 && (i === 0 || seg.response_mask[i - 1] === 0)) runs.push([]);
    if (m === 1) runs[runs.length - 1]!.push(seg.response_ids[i]!);
  });
  return runs;
}

/**
 * Every call the simulator answered is in a segment exactly: the prompt it received is the segment's
 * sequence up to that turn, and the ids it sampled are that turn's mask-1 ids.
 */
function expectTokenExact(rig: GatewayRig, fromLog: number): void {
  const log = rig.sim.requestLog.slice(fromLog);
  expect(log.length).toBe(rig.gateway.calls.length);
  const turnOf = new Map<number, number>();
  rig.gateway.calls.forEach((c, i) => {
    const seg = rig.gateway.book.segments[c.segment]!;
    const k = turnOf.get(c.segment) ?? 0;
    turnOf.set(c.segment, k + 1);
    const runs = generatedRuns(seg);
    // A branched segment's first turn is its first run; earlier turns of its parent are in prompt_ids.
    expect(runs[k], `call ${i}`).toEqual(log[i]!.ids);
    expect(seg.sequence().slice(0, log[i]!.prompt_ids.length), `call ${i} prompt`).toEqual(log[i]!.prompt_ids);
  });
}

describe('agent gateway against the official SDKs (openai-node 6.49.0, anthropic-sdk-typescript 0.71.2)', () => {
  let rig: GatewayRig;
  beforeAll(async () => {
    rig = await startRig([policy]);
  });
  afterAll(async () => rig.close());

  it('chat completions: a tool call, its result appended, the same segment extended without tokenising the earlier turn', async () => {
    const client = new OpenAI({ baseURL: `${rig.base}/v1`, apiKey: 'k', maxRetries: 0 });
    const from = rig.sim.requestLog.length;
    const messages: OpenAI.ChatCompletionMessageParam[] = [
      { role: 'system', content: 'You edit files.' },
      { role: 'user', content: 'Write a.txt. SCRIPT:edit' },
    ];
    const first = await client.chat.completions.create({ model: 'whatever', messages, tools: TOOLS_OPENAI, temperature: 1.3 });
    // openai-node v6.49.0 src/resources/chat/completions/completions.ts: ChatCompletion.Choice.finish_reason
    expect(first.choices[0]!.finish_reason).toBe('tool_calls');
    const tc = first.choices[0]!.message.tool_calls![0]!;
    expect(tc.type).toBe('function');
    expect(tc.type === 'function' && JSON.parse(tc.function.arguments)).toEqual({ path: 'a.txt', content: 'hi' });
    expect(first.choices[0]!.message.content).toBe('I will write the file.');
    messages.push(first.choices[0]!.message, { role: 'tool', tool_call_id: tc.id, content: 'written 2 bytes' });
    const second = await client.chat.completions.create({
      model: 'whatever',
      messages,
      tools: TOOLS_OPENAI,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let usage: OpenAI.CompletionUsage | undefined;
    let finish: string | null = null;
    for await (const chunk of second) {
      text += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      usage = chunk.usage ?? usage;
    }
    expect(text).toBe('The file is written.');
    expect(finish).toBe('stop');
    const calls = rig.gateway.calls.slice(-2);
    expect(calls.map((c) => c.kind)).toEqual(['fresh', 'extend']);
    expect(calls[1]!.segment).toBe(calls[0]!.segment);
    // The second prompt reused every id of the first call (its prompt and its sampled ids).
    expect(calls[1]!.reused_tokens).toBe(calls[0]!.prompt_tokens + calls[0]!.completion_tokens);
    expect(usage?.prompt_tokens_details?.cached_tokens).toBe(calls[1]!.reused_tokens);
    // The harness's temperature is recorded; the trainer's sampling_params decide.
    expect(calls[0]!.asked.temperature).toBe(1.3);
    expect(from).toBe(0);
  });

  it('chat completions stream: the SDK accumulates two parallel tool calls from the chunks', async () => {
    const client = new OpenAI({ baseURL: `${rig.base}/v1`, apiKey: 'k', maxRetries: 0 });
    const stream = client.chat.completions.stream({ model: 'm', messages: [{ role: 'user', content: 'SCRIPT:two' }], tools: TOOLS_OPENAI });
    const done = await stream.finalChatCompletion();
    const calls = done.choices[0]!.message.tool_calls!;
    expect(calls.map((c) => (c.type === 'function' ? [c.function.name, JSON.parse(c.function.arguments)] : null))).toEqual([
      ['read', { path: 'x' }],
      ['read', { path: 'y' }],
    ]);
    expect(new Set(calls.map((c) => c.id)).size).toBe(2);
  });

  it('output whose tool call does not parse comes back as text and is counted', async () => {
    const client = new OpenAI({ baseURL: `${rig.base}/v1`, apiKey: 'k', maxRetries: 0 });
    const before = rig.gateway.invalidToolCalls;
    const r = await client.chat.completions.create({
      model: 'm',
      messages: [{ role: 'user', content: 'SCRIPT:broken' }],
      tools: TOOLS_OPENAI,
    });
    expect(r.choices[0]!.message.tool_calls ?? []).toEqual([]);
    expect(r.choices[0]!.message.content).toContain('<tool_call>');
    expect(r.choices[0]!.finish_reason).toBe('stop');
    expect(rig.gateway.invalidToolCalls).toBe(before + 1);
  });

  it('Anthropic messages: tool_use, then tool_result extends the segment; streaming through MessageStream', async () => {
    const client = new Anthropic({ baseURL: rig.base, apiKey: 'k', maxRetries: 0 });
    const tools: Anthropic.Tool[] = TOOLS_OPENAI.map((t) => ({
      name: t.function.name,
      description: t.function.description,
      input_schema: t.function.parameters as Anthropic.Tool.InputSchema,
    }));
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Write a.txt please. SCRIPT:edit' }];
    const first = await client.messages.create({
      model: 'claude-x',
      max_tokens: 300,
      system: 'You edit files with tools.',
      messages,
      tools,
    });
    // anthropic-sdk-typescript sdk-v0.71.2 src/resources/messages/messages.ts: StopReason, ToolUseBlock
    expect(first.stop_reason).toBe('tool_use');
    const use = first.content.find((b) => b.type === 'tool_use');
    expect(use && use.type === 'tool_use' && use.input).toEqual({ path: 'a.txt', content: 'hi' });
    messages.push({ role: 'assistant', content: first.content });
    messages.push({
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: use!.type === 'tool_use' ? use!.id : '', content: 'written' }],
    });
    const stream = client.messages.stream({ model: 'claude-x', max_tokens: 300, system: 'You edit files with tools.', messages, tools });
    const second = await stream.finalMessage();
    expect(second.content).toEqual([{ type: 'text', text: 'The file is written.', citations: null }].map(({ citations: _, ...b }) => b));
    expect(second.stop_reason).toBe('end_turn');
    const calls = rig.gateway.calls.slice(-2);
    expect(calls.map((c) => c.kind)).toEqual(['fresh', 'extend']);
    expect(calls[1]!.api).toBe('messages');
  });

  it('Responses API: function_call, function_call_output, streamed through ResponseStream, and previous_response_id', async () => {
    const client = new OpenAI({ baseURL: `${rig.base}/v1`, apiKey: 'k', maxRetries: 0 });
    const tools: OpenAI.Responses.FunctionTool[] = TOOLS_OPENAI.map((t) => ({
      type: 'function',
      name: t.function.name,
      description: t.function.description,
      parameters: t.function.parameters,
      strict: false,
    }));
    const first = await client.responses.create({
      model: 'codex-x',
      instructions: 'You edit files.',
      input: 'Write a.txt. SCRIPT:edit',
      tools,
    });
    const fc = first.output.find((o) => o.type === 'function_call');
    expect(fc && fc.type === 'function_call' && JSON.parse(fc.arguments)).toEqual({ path: 'a.txt', content: 'hi' });
    expect(first.output_text).toBe('I will write the file.');
    const stream = client.responses.stream({
      model: 'codex-x',
      instructions: 'You edit files.',
      previous_response_id: first.id,
      input: [{ type: 'function_call_output', call_id: fc!.type === 'function_call' ? fc!.call_id : '', output: 'written' }],
      tools,
    });
    const deltas: string[] = [];
    stream.on('response.output_text.delta', (e) => deltas.push(e.delta));
    const second = await stream.finalResponse();
    expect(second.output_text).toBe('The file is written.');
    expect(deltas.join('')).toBe('The file is written.');
    expect(second.status).toBe('completed');
    expect(rig.gateway.calls.at(-1)!.kind).toBe('extend');
  });

  it('GET /v1/models lists the policy', async () => {
    const client = new OpenAI({ baseURL: `${rig.base}/v1`, apiKey: 'k', maxRetries: 0 });
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual(['raas-policy']);
  });

  it('bad requests get each API its own error shape, naming the field', async () => {
    const openai = new OpenAI({ baseURL: `${rig.base}/v1`, apiKey: 'k', maxRetries: 0 });
    const err = await openai.chat.completions.create({ model: 'm', messages: [] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    // openai-node v6.49.0 src/core/error.ts: APIError reads error.{code,param,type}
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('messages');
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).type).toBe('invalid_request_error');
    const anthropic = new Anthropic({ baseURL: rig.base, apiKey: 'k', maxRetries: 0 });
    const aerr = await anthropic.messages
      .create({ model: 'm', messages: [{ role: 'user', content: 'x' }] } as unknown as Anthropic.MessageCreateParamsNonStreaming)
      .catch((e: unknown) => e);
    expect(aerr).toBeInstanceOf(Anthropic.BadRequestError);
    // anthropic-sdk-typescript sdk-v0.71.2 src/core/error.ts: the body is {type: "error", error: {type, message}}
    expect((aerr as InstanceType<typeof Anthropic.BadRequestError>).error).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: 'max_tokens: Field required' },
    });
  });

  it('a rewritten history (a changed system prompt) opens a new segment and counts the re-tokenised model output', async () => {
    const client = new OpenAI({ baseURL: `${rig.base}/v1`, apiKey: 'k', maxRetries: 0 });
    const msgs: OpenAI.ChatCompletionMessageParam[] = [
      { role: 'system', content: 'A.' },
      { role: 'user', content: 'SCRIPT:edit again' },
    ];
    const a = await client.chat.completions.create({ model: 'm', messages: msgs, tools: TOOLS_OPENAI });
    const before = rig.gateway.retokenized;
    const rewritten: OpenAI.ChatCompletionMessageParam[] = [
      { role: 'system', content: 'B (compacted).' },
      msgs[1]!,
      a.choices[0]!.message,
      { role: 'tool', tool_call_id: a.choices[0]!.message.tool_calls![0]!.id, content: 'ok' },
    ];
    await client.chat.completions.create({ model: 'm', messages: rewritten, tools: TOOLS_OPENAI });
    expect(rig.gateway.calls.at(-1)!.kind).toBe('fresh');
    expect(rig.gateway.retokenized).toBeGreaterThan(before);
    // A retry of the first request shares its prompt: a branch that reuses those ids, nothing re-tokenised.
    const n = rig.gateway.book.segments.length;
    const retokenized = rig.gateway.retokenized;
    await client.chat.completions.create({
      model: 'm',
      messages: [...msgs, a.choices[0]!.message, { role: 'tool', tool_call_id: 'x', content: 'other result' }],
      tools: TOOLS_OPENAI,
    });
    expect(rig.gateway.calls.at(-1)!.kind).toBe('extend');
    await client.chat.completions.create({
      model: 'm',
      messages: [...msgs, a.choices[0]!.message, { role: 'tool', tool_call_id: 'y', content: 'a third result' }],
      tools: TOOLS_OPENAI,
    });
    const last = rig.gateway.calls.at(-1)!;
    expect(last.kind).toBe('branch');
    expect(rig.gateway.book.segments.length).toBe(n + 1);
    expect(rig.gateway.book.segments.at(-1)!.parent).toEqual({ segment: rig.gateway.calls.at(-2)!.segment, shared: expect.any(Number) });
    expect(rig.gateway.retokenized).toBe(retokenized);
  });

  it('every call of the job is token-exact: each prompt is its segment so far, each sampled id is in its segment unchanged', () => {
    expect(rig.gateway.calls.length).toBeGreaterThan(8);
    expectTokenExact(rig, 0);
  });

  it('once the job ends, its gateway refuses calls in the error shape of each API, and the SDKs do not retry them', async () => {
    rig.job.abort();
    const before = rig.sim.requestLog.length;
    const openai = new OpenAI({ baseURL: `${rig.base}/v1`, apiKey: 'k', maxRetries: 3 });
    const err = await openai.chat.completions
      .create({ model: 'm', messages: [{ role: 'user', content: 'SCRIPT:plain' }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.ConflictError);
    expect((err as InstanceType<typeof OpenAI.ConflictError>).code).toBe('gateway_closed');
    const anthropic = new Anthropic({ baseURL: rig.base, apiKey: 'k', maxRetries: 3 });
    const aerr = await anthropic.messages
      .create({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] })
      .catch((e: unknown) => e);
    expect(aerr).toBeInstanceOf(Anthropic.ConflictError);
    expect(rig.sim.requestLog.length).toBe(before);
  });
});
