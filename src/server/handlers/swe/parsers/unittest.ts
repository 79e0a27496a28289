/**
 * Our parser for `python -m unittest -v`, the runner of repositories given as files or a tarball
 * (SWE-bench has none: its Django parser keys tests by unittest's description, not by the dotted id
 * the runner takes). Verbose lines are `name (module.Class) ... ok` (Python 3.11 and later:
 * `name (module.Class.name) ... ok`), a docstring's first line may come between the description and
 * ` ... `, test output may push the status to a later line, and the closing summary repeats every
 * failure as `FAIL: name (module.Class…)`. Keys are the dotted ids the runner takes
 * (`module.Class.name`); a failure or error, once seen, is not overwritten. One pass per line.
 */
import { pyStrip, type StatusMap } from './text.js';

/** unittest's words after ` ... ` (Lib/unittest/runner.py: addSuccess, addFailure, addError, addSkip, addExpectedFailure, addUnexpectedSuccess). */
function statusOf(word: string): string | undefined {
  if (word === 'ok') return 'PASSED';
  if (word === 'FAIL' || word === 'unexpected success') return 'FAILED';
  if (word === 'ERROR') return 'ERROR';
  if (word === 'expected failure') return 'XFAIL';
  if (word === 'skipped' || word.startsWith('skipped ')) return 'SKIPPED';
  return undefined;
}

const DESCRIPTION = /^(\S+) \(([^()\s]+)\)/;

/** The dotted id of a description `name (module.Class)` or `name (module.Class.name)`, else undefined. */
function unittestId(description: string): string | undefined {
  const m = DESCRIPTION.exec(description);
  if (!m) return undefined;
  const [, name, where] = m as unknown as [string, string, string];
  return where.endsWith(`.${name}`) ? where : `${where}.${name}`;
}

export function parseLogUnittest(log: string): StatusMap {
  const map: StatusMap = new Map();
  const set = (id: string, status: string): void => {
    const had = map.get(id);
    if (had === 'FAILED' || had === 'ERROR') return;
    map.set(id, status);
  };
  // The id of the line before (a docstring's first line follows a bare description), and the test whose status is still owed.
  let described: string | undefined;
  let awaiting: string | undefined;
  for (const raw of log.split('\n')) {
    const line = pyStrip(raw);
    const header = /^(FAIL|ERROR): /.exec(line);
    if (header) {
      const id = unittestId(line.slice(header[0].length));
      if (id) set(id, header[1] === 'FAIL' ? 'FAILED' : 'ERROR');
      continue;
    }
    const dots = line.indexOf(' ... ');
    if (dots >= 0) {
      // A subtest (`name (module.Class) [msg]`) reports its parent; its own status follows as usual.
      const id = unittestId(line) ?? described;
      described = undefined;
      const status = statusOf(pyStrip(line.slice(dots + 5)));
      if (id && status) {
        set(id, status);
        awaiting = undefined;
      } else awaiting = id;
      continue;
    }
    const bare = statusOf(line);
    if (bare && awaiting) {
      set(awaiting, bare);
      awaiting = undefined;
      continue;
    }
    described = unittestId(line);
  }
  return map;
}
