import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { exceedsTokens, maxTokenBytes } from '../../src/tokens/bounds.js';
import { qwen3Tokenizer } from '../../src/tokens/tokenizer.js';

const tok = qwen3Tokenizer();

describe('a lower bound of the tokens of a text, without encoding it', () => {
  it("reads Qwen3's longest token: 128 bytes (a run of spaces)", () => {
    expect(maxTokenBytes(tok)).toBe(128);
    expect(Buffer.byteLength(tok.decode([56940]))).toBe(128);
  });

  it('never says a text exceeds a limit its real encoding stays within (property, many scripts and runs)', () => {
    const text = fc.oneof(
      fc.string({ unit: 'grapheme', maxLength: 400 }),
      fc.string({ unit: 'binary', maxLength: 400 }),
      fc.tuple(fc.constantFrom(' ', '=', '-', '\n', 'a', '的', '😀'), fc.integer({ min: 1, max: 3000 })).map(([c, n]) => c.repeat(n)),
    );
    fc.assert(
      fc.property(text, fc.integer({ min: 0, max: 3000 }), (t, limit) => {
        const real = tok.encodePlain(t).length;
        if (exceedsTokens(tok, [{ text: t, index: 0 }], limit)) expect(real).toBeGreaterThan(limit);
      }),
      { numRuns: 300 },
    );
  });

  it('catches a 30 MB message against a 40,960-token window at once, and lets a fitting one through', () => {
    const t0 = performance.now();
    expect(exceedsTokens(tok, [{ text: ' '.repeat(30 * 2 ** 20), index: 0 }], 40_960)).toBe(true);
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(exceedsTokens(tok, [{ id: 151644 }, { text: 'hello world', index: 0 }], 40_960)).toBe(false);
  });
});
