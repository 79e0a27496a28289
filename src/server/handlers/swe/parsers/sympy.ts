/**
 * SWE-bench's sympy log parser (`parse_log_sympy`, swebench/harness/log_parsers/python.py@726c546:199-226):
 * the failure headers its runner prints (`____ sympy/x/tests/test_y.py:test_z ____`), then the
 * verbose lines (`test_z ok`, `test_z F`, `test_z E`). The header regex is emulated per line in one pass.
 */
import { pySplit, pyStrip, type StatusMap } from './text.js';

export function parseLogSympy(log: string): StatusMap {
  const map: StatusMap = new Map();
  const lines = log.split('\n');
  for (const line of lines) {
    const key = failureHeader(line);
    if (key !== undefined) map.set(key, 'FAILED');
  }
  for (const raw of lines) {
    const line = pyStrip(raw);
    if (!line.startsWith('test_')) continue;
    const name = pySplit(line)[0]!;
    if (line.endsWith(' E')) map.set(name, 'ERROR');
    if (line.endsWith(' F')) map.set(name, 'FAILED');
    if (line.endsWith(' ok')) map.set(name, 'PASSED');
  }
  return map;
}

/**
 * The key `re.findall(r"(_*) (.*)\.py:(.*) (_*)", log)` gives for one line (`.` stops at newlines,
 * so every match lies in one line, and at most one per line: a match runs to the line's last space).
 * The leftmost match uses the line's first space; group 2 ends at the last `.py:` that a space still
 * follows, group 3 at the line's last space. A later first space cannot do better, so no match on
 * this line means none at all.
 */
export function failureHeader(line: string): string | undefined {
  const first = line.indexOf(' ');
  if (first < 0) return undefined;
  const last = line.lastIndexOf(' ');
  const q = line.lastIndexOf('.py:', last - 4);
  if (q < first + 1) return undefined;
  return `${line.slice(first + 1, q)}.py:${line.slice(q + 4, last)}`;
}
