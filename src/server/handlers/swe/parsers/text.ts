/**
 * Python's string semantics, for log parsers that must give what SWE-bench's Python gives: `str.split()`
 * and `str.strip()` split and strip on `str.isspace()` characters, which differ from JavaScript's `\s`
 * (Python adds \x1c-\x1f and \x85, JavaScript adds \ufeff). Every helper is one pass over its input.
 */

/** The characters `str.isspace()` accepts (CPython's Py_UNICODE_ISSPACE). */
const PY_SPACE = '\\t\\n\\v\\f\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const SPACE_RUN = new RegExp(`[${PY_SPACE}]+`);
const LEADING = new RegExp(`^[${PY_SPACE}]+`);

/** True when the UTF-16 unit `c` is whitespace to Python. */
export function isPySpaceCode(c: number): boolean {
  if (c <= 0x20) return (c >= 9 && c <= 13) || c >= 0x1c;
  if (c < 0x85) return false;
  return (
    c === 0x85 ||
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000
  );
}

/** `s.strip()`. */
export function pyStrip(s: string): string {
  let a = 0;
  let b = s.length;
  while (a < b && isPySpaceCode(s.charCodeAt(a))) a++;
  while (b > a && isPySpaceCode(s.charCodeAt(b - 1))) b--;
  return a === 0 && b === s.length ? s : s.slice(a, b);
}

/** `s.lstrip()`. */
export function pyLstrip(s: string): string {
  return s.replace(LEADING, '');
}

/** `s.split()` (no separator): runs of whitespace split, empty fields dropped. */
export function pySplit(s: string): string[] {
  const t = pyStrip(s);
  return t === '' ? [] : t.split(SPACE_RUN);
}

/** `s.split(sep, 1)[0]` for a literal separator. */
export function before(s: string, sep: string): string {
  const i = s.indexOf(sep);
  return i < 0 ? s : s.slice(0, i);
}

/** `s.rsplit(sep, 1)[0]` for a literal separator. */
export function beforeLast(s: string, sep: string): string {
  const i = s.lastIndexOf(sep);
  return i < 0 ? s : s.slice(0, i);
}

/** `s.replace(a, b)` (every occurrence, literal). */
export function replaceAll(s: string, a: string, b: string): string {
  return s.includes(a) ? s.split(a).join(b) : s;
}

/** The five values of SWE-bench's TestStatus (swebench/harness/constants/__init__.py@726c546:52-57). */
const TEST_STATUSES = ['FAILED', 'PASSED', 'SKIPPED', 'ERROR', 'XFAIL'] as const;

/** `any(line.startswith(x.value) for x in TestStatus)`. */
export function startsWithStatus(line: string): boolean {
  return TEST_STATUSES.some((s) => line.startsWith(s));
}

/** `any(line.endswith(x.value) for x in TestStatus)`. */
export function endsWithStatus(line: string): boolean {
  return TEST_STATUSES.some((s) => line.endsWith(s));
}

/** A per-test status map, as the harness's parsers return it (keys in insertion order; later lines overwrite). */
export type StatusMap = Map<string, string>;
