/**
 * SWE-bench's pytest log parsers, read from SWE-bench's harness at 726c546
 * (swebench/harness/log_parsers/python.py@726c546) and SWE-Gym's fork at 242429c
 * (SWE-Gym/SWE-Bench-Fork swebench/harness/log_parsers.py@242429c), each rewritten as one pass per
 * line so a log of any shape costs time linear in its length. Where the Python would raise on a
 * malformed line (an IndexError on a line that is only a status word), the line is skipped.
 */
import { endsWithStatus, isPySpaceCode, pySplit, replaceAll, startsWithStatus, type StatusMap } from './text.js';

/** `parse_log_pytest` (python.py@726c546:7-26): `STATUS test_id` lines; FAILED lines lose their ` - ` first. */
export function parseLogPytest(log: string, prepare: (line: string) => string = (l) => l): StatusMap {
  const map: StatusMap = new Map();
  for (const raw of log.split('\n')) {
    let line = prepare(raw);
    if (!startsWithStatus(line)) continue;
    if (line.startsWith('FAILED')) line = replaceAll(line, ' - ', ' ');
    const t = pySplit(line);
    if (t.length <= 1) continue;
    map.set(t[1]!, t[0]!);
  }
  return map;
}

/**
 * `parse_log_pytest_options` (python.py@726c546:29-61): as parse_log_pytest, with a parametrised
 * id whose option is an absolute path reduced to its last component (`test[/tmp/a/b]` → `test[/b]`).
 */
export function parseLogPytestOptions(log: string): StatusMap {
  const map: StatusMap = new Map();
  for (let line of log.split('\n')) {
    if (!startsWithStatus(line)) continue;
    if (line.startsWith('FAILED')) line = replaceAll(line, ' - ', ' ');
    const t = pySplit(line);
    if (t.length <= 1) continue;
    map.set(optionName(t[1]!), t[0]!);
  }
  return map;
}

/**
 * `re.compile(r"(.*?)\[(.*)\]").search(name)` and the path rule after it (python.py@726c546:38, 48-57).
 * The lazy group ends at the first `[` that has a `]` after it, the greedy one at the last `]`
 * (a name holds no newline), so the match is found without backtracking.
 */
export function optionName(name: string): string {
  const close = name.lastIndexOf(']');
  const open = name.indexOf('[');
  if (open < 0 || open >= close) return name;
  const main = name.slice(0, open);
  let option = name.slice(open + 1, close);
  if (option.startsWith('/') && !option.startsWith('//') && !option.includes('*')) option = `/${option.split('/').pop()}`;
  return `${main}[${option}]`;
}

/** Control characters 1-31 (`"".join(chr(c) for c in range(1, 32))`), removed by the v2 parser. */
const CONTROL = /[\x01-\x1f]/g;
/** `re.sub(r"\[(\d+)m", "", line)`: colour codes without their escape. */
const COLOUR = /\[\d+m/g;

/**
 * `parse_log_pytest_v2` (python.py@726c546:144-170): colour codes and control characters removed,
 * then `STATUS id` lines, else (older pytest, `-v` progress lines) `id STATUS`.
 */
export function parseLogPytestV2(log: string): StatusMap {
  const map: StatusMap = new Map();
  for (let line of log.split('\n')) {
    line = line.replace(COLOUR, '').replace(CONTROL, '');
    if (startsWithStatus(line)) {
      if (line.startsWith('FAILED')) line = replaceAll(line, ' - ', ' ');
      const t = pySplit(line);
      if (t.length >= 2) map.set(t[1]!, t[0]!);
    } else if (endsWithStatus(line)) {
      const t = pySplit(line);
      if (t.length >= 2) map.set(t[0]!, t[1]!);
    }
  }
  return map;
}

/**
 * `parse_log_pytest_pydantic` (SWE-Gym log_parsers.py@242429c:244-273): v2, and `FAILED [..]`
 * (a progress percentage) reduced to `FAILED` before the status test.
 */
export function parseLogPytestPydantic(log: string): StatusMap {
  const map: StatusMap = new Map();
  for (let line of log.split('\n')) {
    line = stripFailedBrackets(line.replace(COLOUR, '').replace(CONTROL, ''));
    if (startsWithStatus(line)) {
      if (line.startsWith('FAILED')) line = replaceAll(line, ' - ', ' ');
      const t = pySplit(line);
      if (t.length >= 2) map.set(t[1]!, t[0]!);
    } else if (endsWithStatus(line)) {
      const t = pySplit(line);
      if (t.length >= 2) map.set(t[0]!, t[1]!);
    }
  }
  return map;
}

/**
 * `re.sub(r"FAILED\s*\[.*?\]", "FAILED", line)` on a line without control characters (only spaces
 * can be `\s` there, and the Unicode ones): each `FAILED`, optional whitespace, `[`, up to the first
 * `]`. Once no `]` follows, no later `FAILED` can match either, so the scan stops: one pass.
 */
function stripFailedBrackets(line: string): string {
  if (!line.includes('FAILED')) return line;
  let out = '';
  let from = 0;
  for (let i = line.indexOf('FAILED'); i >= 0; i = line.indexOf('FAILED', from)) {
    let j = i + 6;
    while (j < line.length && isPySpaceCode(line.charCodeAt(j))) j++;
    if (line[j] !== '[') {
      out += line.slice(from, i + 6);
      from = i + 6;
      continue;
    }
    const close = line.indexOf(']', j + 1);
    if (close < 0) break;
    out += `${line.slice(from, i)}FAILED`;
    from = close + 1;
  }
  return out + line.slice(from);
}

/**
 * `parse_log_matplotlib` (python.py@726c546:229-250): parse_log_pytest after `MouseButton.LEFT` → `1`
 * and `MouseButton.RIGHT` → `3` in each line.
 */
export function parseLogMatplotlib(log: string): StatusMap {
  return parseLogPytest(log, (line) => replaceAll(replaceAll(line, 'MouseButton.LEFT', '1'), 'MouseButton.RIGHT', '3'));
}

/**
 * `parse_log_seaborn` (python.py@726c546:173-196): `FAILED id` lines; lines holding ` PASSED `
 * whose second field is PASSED (`id PASSED`); `PASSED id` lines.
 */
export function parseLogSeaborn(log: string): StatusMap {
  const map: StatusMap = new Map();
  for (const line of log.split('\n')) {
    if (line.startsWith('FAILED')) {
      const t = pySplit(line);
      if (t.length >= 2) map.set(t[1]!, 'FAILED');
    } else if (line.includes(' PASSED ')) {
      const t = pySplit(line);
      if (t.length >= 2 && t[1] === 'PASSED') map.set(t[0]!, 'PASSED');
    } else if (line.startsWith('PASSED')) {
      const t = pySplit(line);
      if (t.length >= 2) map.set(t[1]!, 'PASSED');
    }
  }
  return map;
}
