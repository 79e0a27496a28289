import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseToolCalls, runAgent, type AgentOptions, type ToolExecutor } from '../../src/server/agent/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { qwen3Tokenizer } from '../../src/tokens/index.js';
import type { ToolDefinition } from '../../src/tokens/tokenizer.js';
import { SimSession } from './sim-session.js';
import { call, scriptPolicy } from './script-policy.js';

const tok = qwen3Tokenizer();
const TOOLS: ToolDefinition[] = [
  {
    type: 'function',
    function: {
      name: 'calc',
      description: 'Evaluates an arithmetic expression.',
      parameters: { type: 'object', properties: { expr: { type: 'string' } }, required: ['expr'] },
    },
  },
  {
    type: 'function',
    function: {
      name: 'finish',
      description: 'Ends the task with the answer.',
      parameters: { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'] },
    },
  },
];

/** A real (tiny) tool executor: calc evaluates + and * on integers; finish ends; anything else fails. */
const execute: ToolExecutor = async (c) => {
  if (c.name === 'finish') return { observation: 'done', finish: true };
  if (c.name === 'calc') {
    const expr = String(c.arguments.expr ?? '');
    if (!/^[\d+*\s]+$/.test(expr)) throw new Error(`calc: cannot evaluate ${JSON.stringify(expr)}`);
    const value = expr.split('+').reduce((s, t) => s + t.split('*').reduce((p, f) => p * Number(f), 1), 0);
    return { observation: String(value) };
  }
  throw new Error(`unknown tool ${c.name}`);
};

const policy = scriptPolicy({
  basic: [
    `Let me compute.\n${call('calc', { expr: '2+2' })}\n${call('calc', { expr: '3*3' })}`,
    `${call('calc', { expr: 'x' })}\n<tool_call>{"name": "calc", "arguments": {oops}}</tool_call>`,
    `The answer is 4.\n${call('finish', { answer: '4' })}`,
  ],
  forever: [call('calc', { expr: '1+1' })],
});

function base(sim: SimHandle, extra: Partial<AgentOptions> = {}, api: 'vllm' | 'sglang' = 'vllm'): AgentOptions {
  return {
    llm: new SimSession(sim.url, api, 1),
    tokenizer: tok,
    messages: [
      { role: 'system', content: 'You are a careful assistant.' },
      { role: 'user', content: 'What is 2+2? SCRIPT:basic' },
    ],
    tools: TOOLS,
    execute,
    samplingParams: { enable_thinking: false },
    signal: new AbortController().signal,
    ...extra,
  };
}

const startsWith = (a: readonly number[], prefix: readonly number[]): boolean => prefix.every((v, i) => a[i] === v);

describe('parseToolCalls', () => {
  it('reads several calls in order, string arguments, and reports malformed blocks without throwing', () => {
    const text = `a ${call('x', { n: 1 })} b <tool_call>{"name": "y", "arguments": "{\\"k\\": 2}"}</tool_call> <tool_call>{nope}</tool_call> <tool_call>{"arguments": {}}</tool_call> <tool_call>{"name": "z"`;
    const parsed = parseToolCalls(text);
    expect(parsed).toHaveLength(5);
    expect(parsed[0]).toMatchObject({ call: { name: 'x', arguments: { n: 1 } } });
    expect(parsed[1]).toMatchObject({ call: { name: 'y', arguments: { k: 2 } } });
    expect(parsed[2]).toMatchObject({ error: expect.stringMatching(/not valid JSON/) });
    expect(parsed[3]).toMatchObject({ error: expect.stringMatching(/no "name"/) });
    expect(parsed[4]).toMatchObject({ error: expect.stringMatching(/not closed/) });
    expect(parseToolCalls('no calls here')).toEqual([]);
  });
});

describe('runAgent against the real simulated backend', () => {
  let sim: SimHandle;
  beforeAll(async () => {
    sim = await startSim({ seed: 3, request_log: 1000 }, { policies: [policy] });
  });
  afterAll(() => sim.close());

  for (const api of ['vllm', 'sglang'] as const) {
    it(`runs tools turn by turn in token space and finishes (${api})`, async () => {
      const before = sim.requestLog.length;
      const t = await runAgent(base(sim, {}, api));
      const sent = sim.requestLog.slice(before);
      expect(t.finish_reason).toBe('finish');
      expect(t.final).toEqual({ answer: '4' });
      expect(t.num_turns).toBe(3);
      expect(t.malformed_tool_calls).toBe(1);
      expect(t.messages.map((m) => m.role)).toEqual([
        'system',
        'user',
        'assistant',
        'tool',
        'tool',
        'assistant',
        'tool',
        'tool',
        'assistant',
        'tool',
      ]);
      expect(t.messages[3]!.content).toBe('4');
      expect(t.messages[4]!.content).toBe('9');
      expect(t.messages[6]!.content).toMatch(/^ERROR: calc: cannot evaluate/);
      expect(t.messages[7]!.content).toMatch(/^ERROR: could not run this tool call: the tool call is not valid JSON/);
      expect(t.messages[2]!.tool_calls).toEqual([
        { name: 'calc', arguments: { expr: '2+2' }, id: 'call_1' },
        { name: 'calc', arguments: { expr: '3*3' }, id: 'call_2' },
      ]);

      // The first prompt is the chat template's; every later prompt extends the previous one.
      expect(t.tokens.prompt_ids).toEqual(tok.renderPrompt(base(sim).messages, { tools: TOOLS, enableThinking: false }));
      expect(sent).toHaveLength(3);
      expect(sent[0]!.prompt_ids).toEqual(t.tokens.prompt_ids);
      for (let k = 1; k < sent.length; k++)
        expect(startsWith(sent[k]!.prompt_ids, [...sent[k - 1]!.prompt_ids, ...sent[k - 1]!.ids])).toBe(true);
      expect([...t.tokens.prompt_ids, ...t.tokens.response_ids]).toEqual([...sent[2]!.prompt_ids, ...sent[2]!.ids]);

      // Generated ids and logprobs are exactly the backend's, in order, under mask 1.
      const gen = t.tokens.response_ids.filter((_, i) => t.tokens.response_mask[i] === 1);
      const lps = t.tokens.logprobs.filter((_, i) => t.tokens.response_mask[i] === 1);
      expect(gen).toEqual(sent.flatMap((s) => s.ids));
      expect(lps).toEqual(sent.flatMap((s) => s.logprobs));
      expect(t.tokens.logprobs.filter((_, i) => t.tokens.response_mask[i] === 0).every((x) => x === 0)).toBe(true);

      // Spans tile response_ids; each tool span decodes to its tool_response; assistant spans hold token_ids.
      const spans = t.tokens.spans!;
      expect(spans[0]!.start).toBe(0);
      for (let k = 1; k < spans.length; k++) expect(spans[k]!.start).toBe(spans[k - 1]!.end);
      expect(spans.at(-1)!.end).toBe(t.tokens.response_ids.length);
      for (const s of spans) {
        const m = t.messages[s.message_index]!;
        const ids = t.tokens.response_ids.slice(s.start, s.end);
        if (m.role === 'assistant') expect(ids).toEqual(m.token_ids);
        else expect(tok.decode(ids)).toContain(`<tool_response>\n${m.content}\n</tool_response>`);
      }
      // The observation ends with the template's generation prompt (thinking off: the empty think block).
      const last = spans.find((s) => s.message_index === 4)!;
      const obsEnd = tok.decode(t.tokens.response_ids.slice(last.start, last.end));
      expect(obsEnd.endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n')).toBe(true);
      expect(t.weight_versions).toEqual(['default', 'default', 'default']);
    });
  }

  it("stops at max_iterations, running the last turn's tools but sending nothing more", async () => {
    const before = sim.requestLog.length;
    const t = await runAgent(base(sim, { messages: [{ role: 'user', content: 'SCRIPT:forever' }], samplingParams: { max_iterations: 2 } }));
    expect(t.finish_reason).toBe('max_iterations');
    expect(t.num_turns).toBe(2);
    expect(sim.requestLog.length - before).toBe(2);
    expect(t.messages.at(-1)).toMatchObject({ role: 'tool', content: '2' });
    expect(t.tokens.spans!.some((s) => s.message_index === t.messages.length - 1)).toBe(false);
  });

  it('stops at max_response_tokens and clamps each call to what is left', async () => {
    const before = sim.requestLog.length;
    const t = await runAgent(
      base(sim, {
        messages: [{ role: 'user', content: 'tell me things' }],
        samplingParams: { max_response_tokens: 70, max_tokens_per_turn: 40 },
        onNoToolCall: () => 'more',
      }),
    );
    expect(t.finish_reason).toBe('max_response_tokens');
    const generated = t.tokens.response_mask.filter((m) => m === 1).length;
    expect(generated).toBe(70);
    const sent = sim.requestLog.slice(before);
    let used = 0;
    for (const s of sent) {
      expect(s.max_tokens).toBe(Math.min(40, 70 - used));
      used += s.ids.length;
    }
  });

  it('marks a user turn from onNoToolCall with mask 0 and its own span', async () => {
    const t = await runAgent(
      base(sim, {
        messages: [{ role: 'user', content: 'hello' }],
        samplingParams: { max_iterations: 2 },
        onNoToolCall: (_text, turn) => `question ${turn + 2}`,
      }),
    );
    expect(t.finish_reason).toBe('max_iterations');
    expect(t.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'user']);
    const span = t.tokens.spans!.find((s) => s.message_index === 2)!;
    expect(tok.decode(t.tokens.response_ids.slice(span.start, span.end))).toBe(
      '\n<|im_start|>user\nquestion 2<|im_end|>\n<|im_start|>assistant\n',
    );
    expect(t.tokens.response_mask.slice(span.start, span.end).every((m) => m === 0)).toBe(true);
  });
});

describe('runAgent limits from the backend context window', () => {
  let sim: SimHandle;
  beforeAll(async () => {
    sim = await startSim({ seed: 4, max_model_len: 400, request_log: 100, filler: { median_tokens: 60, sigma: 0.2 } });
  });
  afterAll(() => sim.close());

  it('stops at max_model_len (from /v1/models) without a context-overflow error', async () => {
    const t = await runAgent(
      base(sim, { messages: [{ role: 'user', content: 'go on' }], samplingParams: {}, onNoToolCall: () => 'continue please' }),
    );
    expect(t.finish_reason).toBe('max_model_len');
    expect(t.tokens.prompt_ids.length + t.tokens.response_ids.length).toBeLessThanOrEqual(400);
    for (const s of sim.requestLog) expect(s.prompt_ids.length + s.max_tokens).toBeLessThanOrEqual(400);
  });

  it('a smaller max_model_len in sampling_params wins', async () => {
    const t = await runAgent(
      base(sim, { messages: [{ role: 'user', content: 'go on' }], samplingParams: { max_model_len: 330 }, onNoToolCall: () => 'more' }),
    );
    expect(t.finish_reason).toBe('max_model_len');
    expect(t.tokens.prompt_ids.length + t.tokens.response_ids.length).toBeLessThanOrEqual(330);
    expect(t.num_turns).toBeGreaterThan(0);
  });

  it('a turn cut by the context window without a tool call ends with max_model_len, not finish', async () => {
    // No onNoToolCall: a complete text answer would be the model's own finish, but this one was cut.
    const opts = base(sim, { messages: [{ role: 'user', content: 'go on' }], samplingParams: {} });
    const promptLen = opts.tokenizer.renderPrompt(opts.messages, { tools: opts.tools, enableThinking: true }).length;
    // Room for 10 tokens: the filler answer (median 60 tokens) is cut.
    const t = await runAgent({ ...opts, samplingParams: { max_model_len: promptLen + 10, max_tokens_per_turn: 1000 } });
    expect(t.finish_reason).toBe('max_model_len');
    expect(t.num_turns).toBe(1);
    expect(t.tokens.prompt_ids.length + t.tokens.response_ids.length).toBe(promptLen + 10);
  });
});
