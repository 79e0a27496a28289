import { beforeAll, describe, expect, it } from 'vitest';
import type { Message } from '../../src/protocol/process.js';
import { TrajectoryBuilder } from '../../src/server/agent/trajectory.js';
import { qwen3Tokenizer, type Tokenizer } from '../../src/tokens/tokenizer.js';
import { splitThinking, toolCallsOf, trajectoryView, type TrajectorySource } from '../../src/ui/trajectory.js';

// A two-turn tool-using trajectory built the way the agent loop builds one: the Qwen3 chat
// template renders the prompt, each model turn's ids are appended generated (mask 1), each
// observation's ids as the template renders them (mask 0).
function rollout(tok: Tokenizer): TrajectorySource {
  const prompt: Message[] = [
    { role: 'system', content: 'You are a careful mathematician.' },
    { role: 'user', content: 'What is 17 * 23?' },
  ];
  const b = new TrajectoryBuilder(tok.renderPrompt(prompt));
  for (const m of prompt) b.addPromptMessage(m);
  const say = (text: string, lps: (i: number) => number): void => {
    const ids = [...tok.encode(text), tok.eosId];
    b.addModelTurn(
      { role: 'assistant', content: text },
      ids,
      ids.map((_, i) => lps(i)),
    );
  };
  say(
    '<think>\nMultiply.\n</think>\n\n<tool_call>\n{"name": "execute_ipython_cell", "arguments": {"code": "print(17*23)"}}\n</tool_call>',
    () => -0.05,
  );
  const obs: Message = { role: 'tool', content: '391', tool_call_id: 'call_1' };
  b.addObservation([obs], tok.observationIds([obs]));
  say('The answer is \\boxed{391}.', (i) => (i === 2 ? -4 : -0.01));
  return {
    job_id: 'j1',
    reward: 1,
    messages: b.messages,
    tokens: {
      prompt_ids: b.prompt_ids,
      response_ids: b.response_ids,
      response_mask: b.response_mask,
      logprobs: b.logprobs,
      spans: b.spans,
    },
    weight_versions: ['3', '4'],
    details: { answer: '391', ground_truth: '391' },
  };
}

describe('trajectoryView: what the trajectory page draws', () => {
  let tok: Tokenizer;
  beforeAll(() => {
    tok = qwen3Tokenizer();
  });

  it('splits thinking from the answer and reads Qwen3 tool-call blocks', () => {
    expect(splitThinking('<think>\nplan\n</think>\n\nanswer')).toEqual({ thinking: 'plan', answer: 'answer' });
    expect(splitThinking('no think')).toEqual({ answer: 'no think' });
    expect(toolCallsOf('<tool_call>\n{"name": "finish", "arguments": {"answer": "1"}}\n</tool_call>')).toEqual([
      { name: 'finish', arguments: { answer: '1' } },
    ]);
    expect(toolCallsOf('<tool_call>{not json</tool_call>')[0]!.name).toBe('(malformed tool call)');
  });

  it('places every message on the token view by its span, with per-turn logprob figures and weight versions', () => {
    const src = rollout(tok);
    const v = trajectoryView(src, tok, { batch_policy_version: 5 });
    expect(v.turns.map((t) => t.role)).toEqual(['system', 'user', 'assistant', 'tool', 'assistant']);
    const [sys, user, a0, obs, a1] = v.turns;
    const seq = v.sequences[0]!;
    // Prompt messages are found by their <|im_start|> ids; what they cover decodes to their text.
    expect(tok.decode(seq.ids.slice(sys!.start, sys!.end))).toContain('You are a careful mathematician.');
    expect(tok.decode(seq.ids.slice(user!.start, user!.end))).toContain('What is 17 * 23?');
    expect(a0).toMatchObject({ turn: 0, thinking: 'Multiply.', weight_version: '3', staleness: 2, logprob_min: -0.05, low_tokens: 0 });
    expect(a0!.tool_calls).toEqual([{ name: 'execute_ipython_cell', arguments: { code: 'print(17*23)' } }]);
    expect(tok.decode(seq.ids.slice(obs!.start, obs!.end))).toContain('391');
    expect(obs!.tool_call_id).toBe('call_1');
    expect(a1).toMatchObject({ turn: 1, weight_version: '4', staleness: 1, logprob_min: -4, low_tokens: 1 });
    expect(a1!.tokens).toBe(a1!.end! - a1!.start!);
    // Every id has its text; added tokens are named.
    for (const id of seq.ids) expect(v.vocab[id]).toBeTypeOf('string');
    expect(v.vocab[tok.eosId]).toBe('<|im_end|>');
    expect(v.details).toEqual({ answer: '391', ground_truth: '391' });
  });

  it('rebuilds the turns from the ids alone when the rollout carries no messages (a batch without return_messages)', () => {
    const src = rollout(tok);
    const withMessages = trajectoryView(src, tok);
    const { messages: _m, ...bare } = src;
    const v = trajectoryView(bare as TrajectorySource, tok);
    expect(v.turns.map((t) => t.role)).toEqual(['system', 'user', 'assistant', 'tool', 'assistant']);
    expect(v.turns.every((t) => t.from_tokens)).toBe(true);
    expect(v.turns[0]!.content).toBe('You are a careful mathematician.');
    expect(v.turns[1]!.content).toBe('What is 17 * 23?');
    // The model's turns, as generated, match the messages' text; the observation is the template's rendering.
    expect(v.turns[2]!.thinking).toBe('Multiply.');
    expect(v.turns[2]!.tool_calls).toEqual(withMessages.turns[2]!.tool_calls);
    expect(v.turns[4]!.content).toBe('The answer is \\boxed{391}.');
    expect(v.turns[3]!.content).toContain('391');
    expect(v.turns[4]).toMatchObject({ start: withMessages.turns[4]!.start, end: withMessages.turns[4]!.end, low_tokens: 1 });
  });

  it("draws an agent gateway's extra token sequences as further views", () => {
    const src = rollout(tok);
    // The gateway's Segment shape (src/protocol/process.ts): token fields plus index, parent, num_turns.
    src.segments = [
      { ...src.tokens, index: 0, parent: null, num_turns: 2, weight_versions: ['3', '4'] },
      {
        prompt_ids: [1, 2],
        response_ids: [3, 4, 5],
        response_mask: [1, 1, 0],
        logprobs: [-0.1, -0.2, 0],
        index: 1,
        parent: { segment: 0, shared: 2 },
        num_turns: 1,
        weight_versions: ['4'],
      },
    ];
    const v = trajectoryView(src, tok);
    expect(v.sequences.map((s) => s.label)).toEqual([
      'tokens (the main sequence)',
      'segment 0, 2 turns',
      'segment 1 from segment 0 (2 ids shared), 1 turns',
    ]);
    expect(v.sequences[2]).toMatchObject({ ids: [1, 2, 3, 4, 5], prompt_len: 2, mask: [1, 1, 0] });
  });
});
