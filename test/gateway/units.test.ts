import { describe, expect, it } from 'vitest';
import { anthropicMessages } from '../../src/server/gateway/anthropic.js';
import { canonicalJson, sameMessage, textOf } from '../../src/server/gateway/conversation.js';
import { JobGateway } from '../../src/server/gateway/engine.js';
import { openaiResponses } from '../../src/server/gateway/responses.js';
import { renderKey, SegmentBook } from '../../src/server/gateway/segments.js';
import { splitReasoning, toolParser } from '../../src/server/gateway/tool-parsers.js';
import type { GenerateRequest, GenerateResult, LlmSession } from '../../src/server/llm/types.js';
import { qwen3Tokenizer } from '../../src/tokens/tokenizer.js';

const tok = qwen3Tokenizer();
const TOOL = {
  type: 'function' as const,
  function: { name: 'f', description: '', parameters: { type: 'object', properties: { n: { type: 'integer' }, s: { type: 'string' } } } },
};

/** A backend in-process: answers each call with the next scripted text, recording the requests. */
class ScriptedSession implements LlmSession {
  readonly turns: Array<{ backend: string; weight_version: string }> = [];
  readonly requests: GenerateRequest[] = [];
  private gate: Promise<void> | undefined;
  release: (() => void) | undefined;
  constructor(private readonly texts: string[]) {}
  get backend(): string {
    return 'scripted';
  }
  async maxModelLen(): Promise<number> {
    return 40960;
  }
  hold(): void {
    this.gate = new Promise((r) => (this.release = r));
  }
  async generate(req: GenerateRequest): Promise<GenerateResult> {
    this.requests.push(req);
    if (this.gate) await this.gate;
    const ids = tok.encode(`${this.texts.shift() ?? 'done'}<|im_end|>`);
    return { ids, logprobs: ids.map(() => -0.5), finish_reason: 'stop', weight_version: 'v1', backend: 'scripted' };
  }
}

const gw = (texts: string[], sampling = {}) => {
  const llm = new ScriptedSession(texts);
  return {
    llm,
    g: new JobGateway({
      llm,
      tokenizer: tok,
      sampling: { enable_thinking: false, ...sampling },
      parser: toolParser('hermes'),
      maxTokensPerTurn: 100,
    }),
  };
};
const signal = new AbortController().signal;
const req = (messages: Array<Record<string, unknown>>, extra = {}) => ({
  api: 'chat' as const,
  messages: messages as never,
  tools: [TOOL],
  toolChoice: 'auto' as const,
  asked: {},
  ...extra,
});

describe('tool-call parsers', () => {
  it('hermes: calls after text, the text before the first block as content; a broken block keeps the whole text', () => {
    const p = toolParser('hermes');
    expect(p.parse('Hi.\n<tool_call>{"name": "f", "arguments": {"n": 1}}</tool_call>', [TOOL])).toEqual({
      content: 'Hi.',
      calls: [{ name: 'f', arguments: { n: 1 } }],
      invalid: 0,
    });
    const bad = '<tool_call>{"name": "f", "arguments": {"n": 1}}</tool_call><tool_call>{oops}</tool_call>';
    expect(p.parse(bad, [TOOL])).toEqual({ content: bad, calls: [], invalid: 1 });
    expect(p.parse('no calls', [TOOL])).toEqual({ content: 'no calls', calls: [], invalid: 0 });
  });
  it('qwen3_coder: parameters converted by the tool schema (integer read as JSON, string kept)', () => {
    const p = toolParser('qwen3_coder');
    const text =
      'Ok.\n<tool_call>\n<function=f>\n<parameter=n>\n42\n</parameter>\n<parameter=s>\n007\n</parameter>\n</function>\n</tool_call>';
    expect(p.parse(text, [TOOL])).toEqual({ content: 'Ok.', calls: [{ name: 'f', arguments: { n: 42, s: '007' } }], invalid: 0 });
    expect(p.parse('<tool_call>\n<function=f>\n<parameter=n>1', [TOOL]).invalid).toBe(1);
  });
  it('an unknown parser name is a config error naming the choices', () => {
    expect(() => toolParser('nope')).toThrow(/choose one of hermes, qwen3, qwen3_coder/);
  });
  it('reasoning: before </think>, or all of an unclosed <think>', () => {
    expect(splitReasoning('<think>\nplan\n</think>\n\nanswer')).toEqual({ reasoning: 'plan', content: 'answer' });
    expect(splitReasoning('<think>\ncut off')).toEqual({ reasoning: 'cut off', content: '' });
    expect(splitReasoning('plain')).toEqual({ content: 'plain' });
  });
});

describe('messages', () => {
  it('an echoed assistant message matches by visible text and call arguments (key order, ids and reasoning aside)', () => {
    const held = { role: 'assistant' as const, content: 'x', tool_calls: [{ id: 'call_1', name: 'f', arguments: { a: 1, b: [1, 2] } }] };
    expect(
      sameMessage(held, {
        role: 'assistant',
        content: '<think>r</think>x',
        tool_calls: [{ id: 'other', name: 'f', arguments: { b: [1, 2], a: 1 } }],
      }),
    ).toBe(true);
    expect(
      sameMessage(held, { role: 'assistant', content: 'x', tool_calls: [{ id: 'call_1', name: 'f', arguments: { a: 2, b: [1, 2] } }] }),
    ).toBe(false);
    expect(canonicalJson({ b: 1, a: { d: 2, c: 3 } })).toBe('{"a":{"c":3,"d":2},"b":1}');
    expect(
      textOf([
        { type: 'text', text: 'a' },
        { type: 'input_text', text: 'b' },
      ]),
    ).toBe('a\nb');
  });
  it('Anthropic: tool_result blocks become tool messages before the text of the same user turn; server tools are dropped', () => {
    const r = anthropicMessages.translate(
      {
        model: 'm',
        max_tokens: 5,
        system: [{ type: 'text', text: 'sys' }],
        tools: [{ name: 'f', input_schema: { type: 'object' } }, { name: 'web_search', type: 'web_search_20250305' } as never],
        messages: [
          { role: 'user', content: 'go' },
          {
            role: 'assistant',
            content: [
              { type: 'text', text: 'ok' },
              { type: 'tool_use', id: 't1', name: 'f', input: { n: 1 } },
            ],
          },
          {
            role: 'user',
            content: [
              { type: 'tool_result', tool_use_id: 't1', content: [{ type: 'text', text: 'out' }], is_error: true } as never,
              { type: 'text', text: 'next' },
            ],
          },
        ],
      },
      { responses: new Map() },
    );
    expect(r.messages).toEqual([
      { role: 'system', content: 'sys' },
      { role: 'user', content: 'go' },
      { role: 'assistant', content: 'ok', tool_calls: [{ id: 't1', name: 'f', arguments: { n: 1 } }] },
      { role: 'tool', content: 'Error: out', tool_call_id: 't1' },
      { role: 'user', content: 'next' },
    ]);
    expect(r.tools.map((t) => t.function.name)).toEqual(['f']);
  });
  it('Responses: function calls join the assistant message they follow; an unknown previous_response_id is refused', () => {
    const r = openaiResponses.translate(
      {
        model: 'm',
        instructions: 'sys',
        input: [
          { role: 'user', content: [{ type: 'input_text', text: 'go' }] },
          { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'ok' }] },
          { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{"n":1}' },
          { type: 'function_call', call_id: 'c2', name: 'f', arguments: '{"n":2}' },
          { type: 'function_call_output', call_id: 'c1', output: 'one' },
        ],
      },
      { responses: new Map() },
    );
    expect(r.messages[2]).toEqual({
      role: 'assistant',
      content: 'ok',
      tool_calls: [
        { id: 'c1', name: 'f', arguments: { n: 1 } },
        { id: 'c2', name: 'f', arguments: { n: 2 } },
      ],
    });
    expect(r.messages[3]).toEqual({ role: 'tool', content: 'one', tool_call_id: 'c1' });
    expect(() => openaiResponses.translate({ model: 'm', input: 'x', previous_response_id: 'resp_x' }, { responses: new Map() })).toThrow(
      /no response resp_x/,
    );
  });
});

describe('segments', () => {
  it('a request that only re-sends the held conversation (no new message) is rendered fresh, never extended with nothing', () => {
    const book = new SegmentBook();
    const seg = book.open(renderKey([], false), [1, 2], null);
    seg.messages.push({ role: 'user', content: 'a' }, { role: 'assistant', content: 'b' });
    seg.cuts.push(undefined, 5);
    expect(
      book.plan(
        [
          { role: 'user', content: 'a' },
          { role: 'assistant', content: 'b' },
        ],
        renderKey([], false),
      ).kind,
    ).toBe('fresh');
    expect(
      book.plan(
        [
          { role: 'user', content: 'a' },
          { role: 'assistant', content: 'b' },
          { role: 'user', content: 'c' },
        ],
        renderKey([], false),
      ).kind,
    ).toBe('extend');
    // Other tools: another rendering, so nothing is reused.
    expect(
      book.plan(
        [
          { role: 'user', content: 'a' },
          { role: 'assistant', content: 'b' },
          { role: 'user', content: 'c' },
        ],
        renderKey([TOOL], false),
      ).kind,
    ).toBe('fresh');
  });

  it('two concurrent calls extending one segment: the first extends it, the second branches with the same prefix ids', async () => {
    const { llm, g } = gw(['one', 'two', 'three']);
    const base = [{ role: 'user', content: 'q' }];
    const a = await g.complete(req(base), signal);
    const next = [...base, { role: 'assistant', content: a.text }];
    llm.hold();
    const p1 = g.complete(req([...next, { role: 'user', content: 'x' }]), signal);
    const p2 = g.complete(req([...next, { role: 'user', content: 'y' }]), signal);
    await new Promise((r) => setTimeout(r, 10));
    llm.release!();
    await Promise.all([p1, p2]);
    expect(g.calls.map((c) => c.kind)).toEqual(['fresh', 'extend', 'branch']);
    const [s0, s1] = g.book.segments;
    expect(s1!.parent).toEqual({ segment: 0, shared: llm.requests[0]!.prompt_ids.length + g.calls[0]!.completion_tokens });
    expect(s1!.prompt_ids.slice(0, s1!.parent!.shared)).toEqual(s0!.sequence().slice(0, s1!.parent!.shared));
    expect(g.retokenized).toBe(0);
  });

  it('max_tokens: the trainer cap, lowered by the harness and by what is left of max_response_tokens; a spent budget is a context error', async () => {
    const { llm, g } = gw(['abc', 'def'], { max_tokens_per_turn: 50, max_response_tokens: 60 });
    await g.complete(req([{ role: 'user', content: 'q' }], { asked: { max_tokens: 30 } }), signal);
    expect(llm.requests[0]!.max_tokens).toBe(30);
    await g.complete(req([{ role: 'user', content: 'q2' }], { asked: { max_tokens: 1000 } }), signal);
    expect(llm.requests[1]!.max_tokens).toBe(Math.min(50, 60 - g.calls[0]!.completion_tokens));
    const { g: spent } = gw([], { max_response_tokens: 1 });
    await spent.complete(req([{ role: 'user', content: 'q' }]), signal);
    await expect(spent.complete(req([{ role: 'user', content: 'q3' }]), signal)).rejects.toThrow(/response-token budget/);
    expect(spent.limit).toBe('max_response_tokens');
  });

  it('tool_choice "none" returns the text without parsing calls; a closed gateway refuses', async () => {
    const { g } = gw(['<tool_call>{"name": "f", "arguments": {}}</tool_call>']);
    const a = await g.complete(req([{ role: 'user', content: 'q' }], { toolChoice: 'none' }), signal);
    expect(a.toolCalls).toEqual([]);
    expect(a.text).toContain('<tool_call>');
    g.close();
    await expect(g.complete(req([{ role: 'user', content: 'q' }]), signal)).rejects.toMatchObject({ code: 'gateway_closed' });
  });
});
