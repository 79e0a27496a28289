/**
 * Plausible near-misses for the scripted policies' wrong answers: an off-by-one, a flipped
 * comparison, a wrong constant. Deterministic, so a later turn can recognise which plan an earlier
 * turn followed.
 */

interface Rule {
  name: string;
  re: RegExp;
  to: (m: RegExpExecArray) => string;
}

const RULES: Rule[] = [
  { name: 'range-inclusive', re: /range\(([^()]*?)\s*\+\s*1\)/, to: (m) => `range(${m[1]})` },
  { name: 'le-to-lt', re: /<=/, to: () => '<' },
  { name: 'ge-to-gt', re: />=/, to: () => '>' },
  { name: 'lt-to-le', re: / < /, to: () => ' <= ' },
  { name: 'gt-to-ge', re: / > /, to: () => ' >= ' },
  { name: 'range-short', re: /range\(([A-Za-z_][\w.]*)\)/, to: (m) => `range(${m[1]} - 1)` },
  { name: 'drop-plus-one', re: / \+ 1\b/, to: () => '' },
  { name: 'drop-minus-one', re: / - 1\b/, to: () => '' },
  { name: 'true-false', re: /\bTrue\b/, to: () => 'False' },
  { name: 'false-true', re: /\bFalse\b/, to: () => 'True' },
  { name: 'lower-upper', re: /\.lower\(\)/, to: () => '.upper()' },
  { name: 'minus-plus', re: / - /, to: () => ' + ' },
  { name: 'plus-minus', re: / \+ /, to: () => ' - ' },
  { name: 'int-literal', re: /\b([1-9]\d*)\b/, to: (m) => String(Number(m[1]) + 1) },
  { name: 'gt-to-lt', re: / > /, to: () => ' < ' },
  { name: 'lt-to-gt', re: / < /, to: () => ' > ' },
];

/**
 * Applies the first rule (in priority order) that matches any of `lines` whose index passes
 * `eligible` and whose result `accept` takes; returns the new lines and the rule's name, or
 * undefined when no rule applies.
 */
export function mutateLines(
  lines: string[],
  eligible: (i: number) => boolean = () => true,
  accept: (lines: string[]) => boolean = () => true,
): { lines: string[]; rule: string } | undefined {
  for (const rule of RULES) {
    for (let i = 0; i < lines.length; i++) {
      if (!eligible(i)) continue;
      const line = lines[i]!;
      // Leave comments and docstrings alone: a mutation there changes nothing.
      const code = line.replace(/#.*$/, '');
      if (/^\s*("""|''')/.test(line)) continue;
      const m = rule.re.exec(code);
      if (!m) continue;
      const out = [...lines];
      out[i] = code.slice(0, m.index) + rule.to(m) + code.slice(m.index + m[0].length) + line.slice(code.length);
      if (accept(out)) return { lines: out, rule: rule.name };
    }
  }
  return undefined;
}

/** A near-miss of a program: one rule applied, else a spurious first output line. */
export function mutateProgram(source: string): string {
  const lines = source.split('\n');
  const r = mutateLines(lines);
  return r ? r.lines.join('\n') : `print(0)\n${source}`;
}

/** A near-miss of a math answer: integers ±1, the numerator of a fraction +1, a digit changed. */
export function nearMissAnswer(answer: string): string {
  const s = answer.trim();
  const int = /^(-?\d+)(.*)$/.exec(s);
  if (int && !/^[.\d]/.test(int[2]!)) return `${Number(int[1]) + 1}${int[2]}`;
  const dec = /^(-?\d*\.)(\d*)(\d)(.*)$/.exec(s);
  if (dec) return `${dec[1]}${dec[2]}${(Number(dec[3]) + 1) % 10}${dec[4]}`;
  const frac = /\\[dt]?frac\{(-?\d+)\}/.exec(s);
  if (frac) return s.replace(frac[0], frac[0].replace(`{${frac[1]}}`, `{${Number(frac[1]) + 1}}`));
  const digit = /\d/.exec(s);
  if (digit) return s.slice(0, digit.index) + String((Number(digit[0]) + 1) % 10) + s.slice(digit.index + 1);
  return `${s}+1`;
}
