// Extractors that read model output are linear in it, with a size bound: counted in characters
// visited, never in wall time (the timings are in bench/extract.ts). The attack: a final turn of
// `\boxed` + spaces + `{`, repeated, never closed, which made the old extraction scan to the end of
// the text from every `{` (26,402 such ids stalled /health for 7-8 s).
import { describe, expect, it } from 'vitest';
import {
  MAX_ANSWER_CHARS,
  MAX_SCAN_CHARS,
  answersMatch,
  lastBoxed,
  normaliseAnswer,
  scanLastBoxed,
} from '../../src/server/handlers/math/grade.js';
import { MAX_SCAN_CHARS as CODE_SCAN, lastPythonBlock, scanLastPythonBlock } from '../../src/server/handlers/code/index.js';

const attack = (n: number): string => '\\boxed   {'.repeat(Math.ceil(n / 10)).slice(0, n);

/** The scan the old extraction did: from each opening brace to its close or the end (characters visited). */
function oldSteps(text: string): number {
  let steps = 0;
  const re = /\\(?:boxed|fbox)\s*(\{|\s)/g;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    if (m[1] !== '{') continue;
    let depth = 1;
    for (let i = m.index + m[0].length; i < text.length && depth > 0; i++, steps++) depth += text[i] === '{' ? 1 : text[i] === '}' ? -1 : 0;
  }
  return steps;
}

describe('math answer extraction', () => {
  it('visits each character a bounded number of times on the attack (the old scan grew with the square)', () => {
    for (const n of [10_000, 100_000, 400_000]) {
      const { value, steps } = scanLastBoxed(attack(n));
      expect(value).toBeUndefined();
      expect(steps, `n = ${n}`).toBeLessThanOrEqual(2 * n);
    }
    // The old extraction on the same input: about n²/20 characters visited.
    expect(oldSteps(attack(20_000))).toBeGreaterThan(20_000 * 500);
  });

  it('reads only the last MAX_SCAN_CHARS of a longer text, so its work is bounded whatever the length', () => {
    const long = `${attack(3 * MAX_SCAN_CHARS)}\\boxed{42}`;
    const { value, steps } = scanLastBoxed(long);
    expect(value).toBe('42');
    expect(steps).toBeLessThanOrEqual(2 * MAX_SCAN_CHARS + 10);
  });

  it('answers as before on nested, closed and unclosed boxes', () => {
    expect(lastBoxed('\\boxed{\\frac{1}{2}} and \\boxed {x^{2}}')).toBe('x^{2}');
    expect(lastBoxed('\\boxed{a} \\boxed{b')).toBe('a');
    expect(lastBoxed('} } \\boxed{ {a} } }')).toBe(' {a} ');
    expect(lastBoxed('\\boxed 5$ and \\fbox{6}')).toBe('6');
    expect(lastBoxed('\\boxed{1}\\boxed 7')).toBe('7');
  });

  it('normalises and compares answers within a size bound: long $-runs and digit strings are no work', () => {
    expect(normaliseAnswer(`${'$'.repeat(50_000)}5${'$'.repeat(50_000)}`)).toBe('5');
    expect(normaliseAnswer(`${'$'.repeat(50_000)}x$y`)).toBe('x$y');
    expect(answersMatch('1'.repeat(MAX_ANSWER_CHARS + 1), '1'.repeat(MAX_ANSWER_CHARS + 1))).toBe(false);
    expect(answersMatch(`${'1'.repeat(5000)}x`, '1')).toBe(false);
    expect(answersMatch('0.50', '\\frac{1}{2}')).toBe(true);
  });
});

describe('code: the fenced block of a prose answer', () => {
  it('is found in one pass over unclosed fences, with a size bound', () => {
    for (const n of [10_000, 100_000, 400_000]) {
      // Fences that open and close empty blocks, then one that opens and never closes.
      const text = `${'```\n'.repeat(n / 4)}\`\`\`python\n${'x'.repeat(n)}`;
      const { value, steps } = scanLastPythonBlock(text);
      expect(value).toBe('');
      expect(steps, `n = ${n}`).toBeLessThanOrEqual(2 * (2 * n + 10));
    }
    expect(scanLastPythonBlock('x'.repeat(3 * CODE_SCAN)).steps).toBeLessThanOrEqual(CODE_SCAN + 1);
  });

  it('answers what the regular expression answered', () => {
    const re = (t: string) => [...t.matchAll(/```(?:python|py)?\n([\s\S]*?)```/g)].pop()?.[1];
    for (const t of [
      '```python\nprint(1)\n```',
      'a ```py\nx\n``` b ```\ny\n```',
      '````\nz\n```',
      '```pyth\nq\n```',
      '```\nopen',
      '```python\na```\n```\nb```',
      '```js\nno```',
    ]) {
      expect(lastPythonBlock(t), JSON.stringify(t)).toBe(re(t));
    }
  });
});
