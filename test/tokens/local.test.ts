import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RaasError } from '../../src/protocol/errors.js';
import { runAgent } from '../../src/server/agent/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { loadTokenizer } from '../../src/tokens/index.js';
import { SimSession } from '../agent/sim-session.js';

// A byte-level BPE tokenizer with 10 merges and its own chat template (<|user|> ... <|end|>), written
// for these tests: nothing Qwen-specific may leak into the agent or the simulator.
const DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures/tiny-bpe');

describe('a non-Qwen tokenizer from a local folder', () => {
  const tok = loadTokenizer(DIR);

  it('encodes, decodes and renders its own chat template', () => {
    expect(tok.name).toBe('tiny-bpe');
    expect(tok.eosId).toBe(tok.encode('<|end|>')[0]);
    expect(tok.stopIds).toEqual([tok.eosId, tok.encode('<|pad|>')[0]]);
    const text = 'the weather in 🫠 city\n\n';
    expect(tok.decode(tok.encode(text))).toBe(text);
    expect(tok.encode(' the')).toHaveLength(1); // a merge applies
    const prompt = tok.renderPrompt([
      { role: 'system', content: 'S' },
      { role: 'user', content: 'hi' },
    ]);
    expect(tok.decode(prompt)).toBe('<|system|>\nS<|end|><|user|>\nhi<|end|><|assistant|>\n');
    expect(tok.decode(tok.observationIds([{ role: 'tool', content: '42' }]))).toBe('<|tool|>\n42<|end|><|assistant|>\n');
  });

  it('names the missing file and the fix', () => {
    expect(() => loadTokenizer(path.join(DIR, 'nope'))).toThrow(RaasError);
    expect(() => loadTokenizer(path.join(DIR, 'nope'))).toThrow(/tokenizer\.json and tokenizer_config\.json/);
  });

  describe('agent and simulator on it', () => {
    let sim: SimHandle;
    beforeAll(async () => {
      sim = await startSim({ tokenizer: DIR, max_model_len: 2048, request_log: 50 });
    });
    afterAll(() => sim.close());

    it("runs a multi-turn trajectory whose ids are the tiny tokenizer's", async () => {
      const t = await runAgent({
        llm: new SimSession(sim.url, 'vllm', 2),
        tokenizer: tok,
        messages: [{ role: 'user', content: 'talk' }],
        tools: [],
        execute: async () => ({ observation: '' }),
        samplingParams: { max_iterations: 3, max_tokens_per_turn: 100 },
        signal: new AbortController().signal,
        onNoToolCall: () => 'again',
      });
      expect(t.finish_reason).toBe('max_iterations');
      expect(t.num_turns).toBe(3);
      const vocab = 272;
      expect([...t.tokens.prompt_ids, ...t.tokens.response_ids].every((id) => id < vocab)).toBe(true);
      for (const m of t.messages.filter((x) => x.role === 'assistant')) expect(m.token_ids!.at(-1)).toBe(tok.eosId);
      const obs = t.tokens.spans!.find((s) => t.messages[s.message_index]!.role === 'user')!;
      expect(tok.decode(t.tokens.response_ids.slice(obs.start, obs.end))).toBe('<|user|>\nagain<|end|><|assistant|>\n');
    });
  });
});
