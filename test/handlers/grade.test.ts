import { describe, expect, it } from 'vitest';
import { answersMatch, extractAnswer, lastBoxed, mathPrompt, normaliseAnswer } from '../../src/server/handlers/math/index.js';
import { nearMissAnswer } from '../../src/sim/policies/mutate.js';
import { readJsonl } from './helpers.js';

describe('math grading', () => {
  // [model answer, ground truth, equal?]
  const table: Array<[string, string, boolean]> = [
    ['42', '42', true],
    ['42.0', '42', true],
    ['042', '42', true],
    ['41', '42', false],
    ['0.5', '\\frac{1}{2}', true],
    ['1/2', '\\frac{1}{2}', true],
    ['\\dfrac{1}{2}', '\\frac12', true],
    ['\\tfrac{2}{4}', '0.5', true],
    ['\\frac{2}{3}', '0.67', false],
    ['-\\frac{3}{4}', '-0.75', true],
    ['25\\%', '25', true],
    ['25%', '25\\%', true],
    ['120^\\circ', '120', true],
    ['120^{\\circ}', '120°', true],
    ['$3.6$', '3.6', true],
    ['3.60', '3.6', true],
    ['\\$68', '68', true],
    ['28\\text{ cm}', '28', true],
    ['\\text{28}', '28', true],
    ['x = 5', '5', true],
    ['\\left(\\frac{4}{9}\\right)', '\\frac{4}{9}', true],
    ['1,000', '1000', true],
    ['9\\pi', '9\\pi', true],
    ['9 \\pi', '9\\pi', true],
    ['6\\sqrt2', '6\\sqrt{2}', true],
    ['7\\sqrt{2}', '6\\sqrt{2}', false],
    ['', '0', false],
    ['\\frac{1}{0}', '1', false],
  ];
  it.each(table)('%s vs %s → %s', (answer, truth, equal) => {
    expect(answersMatch(answer, truth)).toBe(equal);
  });

  it('finds the last \\boxed{} with nested braces, and \\boxed without braces', () => {
    expect(lastBoxed('first \\boxed{1} then \\boxed{\\frac{1}{2}} end')).toBe('\\frac{1}{2}');
    expect(lastBoxed('so \\boxed 7.')).toBe('7.');
    expect(lastBoxed('no answer here')).toBeUndefined();
    expect(lastBoxed('unclosed \\boxed{\\frac{1}{2}')).toBeUndefined();
    expect(normaliseAnswer(' $\\boxed{x}$ ')).toBe('x');
    expect(answersMatch('\\boxed{\\dfrac{1}{2}}', '0.5')).toBe(true);
  });

  it('prefers the finish answer, then the latest boxed answer', () => {
    const msgs = [
      { role: 'assistant', content: 'maybe \\boxed{3}' },
      { role: 'tool', content: '\\boxed{99}' },
      { role: 'assistant', content: 'final: \\boxed{4}' },
    ];
    expect(extractAnswer({ answer: '5' }, msgs)).toBe('5');
    expect(extractAnswer({ answer: 6 }, msgs)).toBe('6');
    expect(extractAnswer({}, msgs)).toBe('4');
    expect(extractAnswer(undefined, msgs.slice(0, 2))).toBe('3');
    expect(extractAnswer(undefined, [])).toBeUndefined();
  });

  it('adds the boxed instruction only when the problem lacks one', () => {
    expect(mathPrompt('What is 1+1?')).toContain('\\boxed{}');
    const verl = "What is 1+1? Let's think step by step and output the final answer within \\boxed{}.";
    expect(mathPrompt(verl)).toBe(verl);
  });

  it('grades every dataset answer right against itself and its near-miss wrong', () => {
    const rows = readJsonl('math.jsonl');
    expect(rows.length).toBeGreaterThanOrEqual(50);
    for (const r of rows) {
      const answer = String(r.answer);
      expect(answersMatch(answer, answer), answer).toBe(true);
      expect(answersMatch(nearMissAnswer(answer), answer), `${answer} vs ${nearMissAnswer(answer)}`).toBe(false);
    }
  });
});
