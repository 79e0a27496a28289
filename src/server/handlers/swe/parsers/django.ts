/**
 * SWE-bench's Django log parser (`parse_log_django`, swebench/harness/log_parsers/python.py@726c546:64-141),
 * rewritten as passes whose cost is linear in the log: the line rules as they are, and the three
 * multi-line regular expressions of its end emulated without backtracking.
 */
import { isPySpaceCode, before, beforeLast, pyLstrip, pySplit, pyStrip, type StatusMap } from './text.js';

const PASS_SUFFIXES = [' ... ok', ' ... OK', ' ...  OK'] as const;

/** `parse_log_django`: unittest's verbose lines (`name (module.Class) ... ok`) and its failure headers. */
export function parseLogDjango(log: string): StatusMap {
  const map: StatusMap = new Map();
  let prev: string | undefined;
  for (const raw of log.split('\n')) {
    let line = pyStrip(raw);
    if (line.includes('--version is equivalent to version')) map.set('--version is equivalent to version', 'PASSED');
    if (line.includes(' ... ')) prev = before(line, ' ... ');
    for (const suffix of PASS_SUFFIXES) {
      if (!line.endsWith(suffix)) continue;
      // SWE-bench's own exception for django__django-7188 (python.py@726c546:93-99).
      if (line.startsWith('Applying sites.0002_alter_domain_unique...test_no_migrations')) {
        const i = line.indexOf('...');
        line = pyStrip(line.slice(i + 3));
      }
      map.set(beforeLast(line, suffix), 'PASSED');
      break;
    }
    if (line.includes(' ... skipped')) map.set(before(line, ' ... skipped'), 'SKIPPED');
    if (line.endsWith(' ... FAIL')) map.set(before(line, ' ... FAIL'), 'FAILED');
    if (line.startsWith('FAIL:')) {
      const t = pySplit(line);
      if (t.length >= 2) map.set(pyStrip(t[1]!), 'FAILED');
    }
    if (line.endsWith(' ... ERROR')) map.set(before(line, ' ... ERROR'), 'ERROR');
    if (line.startsWith('ERROR:')) {
      const t = pySplit(line);
      if (t.length >= 2) map.set(pyStrip(t[1]!), 'ERROR');
    }
    if (pyLstrip(line).startsWith('ok') && prev !== undefined) map.set(prev, 'PASSED');
  }
  // python.py@726c546:132-140: a test whose "ok" a long multi-line message pushed to the next line.
  const silenced = firstAtLineEnd(log, ' silenced).\nok');
  for (const name of multiline(log, 'Testing against Django installed in ', silenced)) map.set(name, 'PASSED');
  const newline = nextOf(log, '\n');
  for (const name of multiline(log, 'Internal Server Error: /', (p) => slashLine(log, p, newline))) map.set(name, 'PASSED');
  const check = 'System check identified no issues (0 silenced)\nok';
  for (const name of multiline(log, check, (p) => (atLineEnd(log, p) ? p : -1))) map.set(name, 'PASSED');
  return map;
}

/** `$` in MULTILINE mode: the end of the text or before a newline. */
function atLineEnd(log: string, i: number): boolean {
  return i === log.length || log[i] === '\n';
}

/**
 * The group-1 texts of `re.finditer(r"^(.*?)\s\.\.\.\s" + literal + REST, log, re.MULTILINE)`, where
 * `rest(p)` answers where REST, tried at `p` (just after the literal), ends, or -1.
 *
 * A match starts at a line start `b` no earlier than where the previous match ended. Its lazy
 * group holds no newline, so it ends at an opening (whitespace, `...`, whitespace, the literal)
 * inside `b`'s line or on the newline that ends it: the first such opening for which REST matches.
 * Openings are visited in order, each once, with the start of its line tracked by one forward scan.
 */
function multiline(log: string, literal: string, rest: (p: number) => number): string[] {
  const names: string[] = [];
  let from = 0;
  let lineStart = 0;
  let scan = 0;
  for (let x = log.indexOf(literal, 5); x >= 0; x = log.indexOf(literal, x + 1)) {
    const o = x - 5;
    if (!isPySpaceCode(log.charCodeAt(o)) || !log.startsWith('...', o + 1) || !isPySpaceCode(log.charCodeAt(o + 4))) continue;
    // A newline at `o` itself ends the line `o` belongs to.
    for (; scan < o; scan++) if (log.charCodeAt(scan) === 10) lineStart = scan + 1;
    if (lineStart < from) continue;
    const end = rest(o + 5 + literal.length);
    if (end < 0) continue;
    names.push(log.slice(lineStart, o));
    from = end + 1;
  }
  return names;
}

/**
 * A finder of the first `text` at or after `p` that ends a line (`(?s:.*?)text$`), or -1; the
 * position just after it. Callers ask with growing `p`, so the answer is kept until `p` passes it
 * and all searches together read the log once.
 */
function firstAtLineEnd(log: string, text: string): (p: number) => number {
  return memoForward((p) => {
    let at = log.indexOf(text, p);
    while (at >= 0 && !atLineEnd(log, at + text.length)) at = log.indexOf(text, at + 1);
    return at;
  }, text.length);
}

/** A finder of the first `text` at or after `p`, or -1; the position just after it (same memo). */
function nextOf(log: string, text: string): (p: number) => number {
  return memoForward((p) => log.indexOf(text, p), text.length);
}

/**
 * Wraps a forward search `find(p)` (first hit at or after `p`, or -1): a hit at or after a later
 * `p` is still the first one, and no hit stays none, so growing `p` costs one pass in total.
 */
function memoForward(find: (p: number) => number, length: number): (p: number) => number {
  let askedFrom = -1;
  let at = -1;
  return (p) => {
    if (askedFrom < 0 || p < askedFrom || (at >= 0 && at < p)) {
      at = find(p);
      askedFrom = p;
    }
    return at < 0 ? -1 : at + length;
  };
}

/**
 * Where `(.*)\/\nok$` ends when tried at `p`: the greedy group cannot pass a newline, so the line
 * from `p` must end with a `/` at or after `p`, and the next line be `ok`.
 */
function slashLine(log: string, p: number, newline: (p: number) => number): number {
  const after = newline(p);
  const e = after - 1;
  if (after < 0 || e - 1 < p || log[e - 1] !== '/') return -1;
  return log.startsWith('ok', e + 1) && atLineEnd(log, e + 3) ? e + 3 : -1;
}
