/**
 * Math answer grading: the last `\boxed{}` of a text, answer normalisation, and exact comparison.
 * Numbers (integers, decimals, fractions, `\frac`, percentages, thousands separators) compare as
 * exact rationals; anything else compares as normalised LaTeX text.
 */

/**
 * How much of a text the answer extraction reads: its last MAX_SCAN_CHARS characters (a final
 * answer is at the end; a model that writes megabytes gets its tail read). Every extractor here is
 * one pass over at most that much.
 */
export const MAX_SCAN_CHARS = 1 << 20;

/** Longest answer compared (normalised, as rationals): a longer one does not match. */
export const MAX_ANSWER_CHARS = 10_000;

/** The content of the last `\boxed{...}` (or `\fbox{...}`, or `\boxed 5`) in `text`, else undefined. */
export function lastBoxed(text: string): string | undefined {
  return scanLastBoxed(text).value;
}

/**
 * lastBoxed with the number of characters it visited (`steps`), which stays linear in the text:
 * the brace that closes each `{` is found for all of them in one pass with a stack (the first `}`
 * at which the depth counted from a `{` returns to zero is the one that pops it), so a `\boxed{`
 * that never closes costs one lookup instead of a scan to the end of the text.
 */
export function scanLastBoxed(full: string): { value: string | undefined; steps: number } {
  const text = full.length > MAX_SCAN_CHARS ? full.slice(-MAX_SCAN_CHARS) : full;
  let steps = 0;
  let close: Int32Array | undefined;
  const closing = (open: number): number => {
    if (!close) {
      close = new Int32Array(text.length).fill(-1);
      const stack: number[] = [];
      for (let i = 0; i < text.length; i++) {
        steps++;
        const c = text.charCodeAt(i);
        if (c === 123) stack.push(i);
        else if (c === 125 && stack.length) close[stack.pop()!] = i;
      }
    }
    return close[open]!;
  };
  const re = /\\(?:boxed|fbox)\s*(\{|\s)/g;
  const word = /[^\s$]+/y;
  let found: string | undefined;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    steps++;
    const start = m.index + m[0].length;
    if (m[1] === '{') {
      const end = closing(start - 1);
      if (end >= 0) found = text.slice(start, end);
    } else {
      word.lastIndex = start;
      const rest = word.exec(text);
      if (rest) {
        steps += rest[0].length;
        found = rest[0];
      }
    }
  }
  return { value: found, steps };
}

/** Reduces an answer to a canonical text: LaTeX wrappers, units, degree signs, `$`, spaces removed. */
export function normaliseAnswer(raw: string): string {
  // A finish answer written as \boxed{5} counts as 5.
  let s = trimDollars((lastBoxed(raw) ?? raw).trim());
  s = s.replace(/^\\\(|\\\)$/g, '').replace(/^\\\[|\\\]$/g, '');
  s = s.replace(/\\(?:displaystyle|left|right|!|,|;|:|quad|qquad)/g, '').replace(/\\ /g, ' ');
  s = s.replace(/\\[dt]frac/g, '\\frac');
  s = s.replace(/\^\s*\{?\\circ\}?|°|\\degree/g, '');
  s = s.replace(/\\%|%|\\percent/g, '');
  // \text{ cm} after a value is a unit; \text{yes} alone is the answer.
  s = s.replace(/(\S)\s*\\(?:text|mbox|mathrm)\{\s[^{}]*\}\s*$/g, '$1');
  s = s.replace(/\\(?:text|textbf|mbox|mathrm|mathbf)\{([^{}]*)\}/g, '$1');
  s = s.replace(/\\\$/g, '');
  // `x = 5`, `a=\frac12`: keep the value of a single-letter assignment.
  s = s.replace(/^[a-zA-Z]\s*=\s*/, '');
  s = s.replace(/\s+/g, '');
  s = s.replace(/\.$/, '');
  // \frac12 → \frac{1}{2}, \frac1{2} → \frac{1}{2}, \sqrt2 → \sqrt{2}
  s = s
    .replace(/\\frac(\d)(\d)/g, '\\frac{$1}{$2}')
    .replace(/\\frac(\d)\{/g, '\\frac{$1}{')
    .replace(/\\frac\{([^{}]+)\}(\d)/g, '\\frac{$1}{$2}');
  s = s.replace(/\\sqrt(\d+)/g, '\\sqrt{$1}');
  // 1,000,000 → 1000000 (only well-formed thousands groups)
  if (/^-?\d{1,3}(,\d{3})+(\.\d+)?$/.test(s)) s = s.replace(/,/g, '');
  if (/^\{.*\}$/.test(s) && balanced(s.slice(1, -1))) s = s.slice(1, -1);
  // (x) → x, but not a tuple or an interval such as (1,2).
  if (/^\(.*\)$/.test(s) && !s.includes(',') && balanced(s.slice(1, -1), '(', ')')) s = s.slice(1, -1);
  return s;
}

/** An exact rational n/d (d > 0), or undefined when `s` is not a plain number. */
function toRational(s: string): { n: bigint; d: bigint } | undefined {
  let m = /^(-?)\\frac\{(-?\d+(?:\.\d+)?)\}\{(-?\d+(?:\.\d+)?)\}$/.exec(s);
  if (m) return divide(m[1] === '-' ? negate(decimal(m[2]!)) : decimal(m[2]!), decimal(m[3]!));
  m = /^(-?\d+(?:\.\d+)?)\/(-?\d+(?:\.\d+)?)$/.exec(s);
  if (m) return divide(decimal(m[1]!), decimal(m[2]!));
  if (/^[-+]?(\d+(\.\d*)?|\.\d+)$/.test(s)) return decimal(s);
  return undefined;
}

/** True when `answer` equals `truth` after normalisation (exactly, as rationals when both are numbers). */
export function answersMatch(answer: string | undefined, truth: string): boolean {
  if (answer === undefined || answer.length > MAX_SCAN_CHARS) return false;
  const a = normaliseAnswer(answer);
  const t = normaliseAnswer(truth);
  if (a === '' || a.length > MAX_ANSWER_CHARS) return false;
  if (a === t) return true;
  // BigInt arithmetic on thousands of digits is not linear: numbers that long are compared as text only.
  if (a.length > 400 || t.length > 400) return false;
  const ra = toRational(a);
  const rt = toRational(t);
  if (ra && rt) return ra.n * rt.d === rt.n * ra.d;
  return false;
}

/** `s` without leading and trailing `$` (what `/^\$+|\$+$/g` removes, without its backtracking on a long run of `$`). */
function trimDollars(s: string): string {
  let a = 0;
  let b = s.length;
  while (a < b && s[a] === '$') a++;
  while (b > a && s[b - 1] === '$') b--;
  return s.slice(a, b);
}

function decimal(s: string): { n: bigint; d: bigint } {
  const neg = s.startsWith('-');
  const body = s.replace(/^[-+]/, '');
  const [int = '0', frac = ''] = body.split('.');
  const d = 10n ** BigInt(frac.length);
  const n = BigInt((int || '0') + frac);
  return { n: neg ? -n : n, d };
}

function negate(r: { n: bigint; d: bigint }): { n: bigint; d: bigint } {
  return { n: -r.n, d: r.d };
}

function divide(a: { n: bigint; d: bigint }, b: { n: bigint; d: bigint }): { n: bigint; d: bigint } | undefined {
  if (b.n === 0n) return undefined;
  const n = a.n * b.d;
  const d = a.d * b.n;
  return d < 0n ? { n: -n, d: -d } : { n, d };
}

function balanced(s: string, open = '{', close = '}'): boolean {
  let depth = 0;
  for (const ch of s) {
    if (ch === open) depth++;
    else if (ch === close && --depth < 0) return false;
  }
  return depth === 0;
}
