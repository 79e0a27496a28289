import { randomBytes } from 'node:crypto';
import path from 'node:path';
import type { LogParserName, StatusMap } from './parsers/index.js';

/**
 * Tamper canaries: tests that grading adds to each graded run, beside the instance's tests and
 * under the same runner, conftest files and package `__init__`s, named at random per grading (no
 * fixed prefix a patch could single out). Some must pass, some must fail. Code that forges the
 * test framework's reports (a replaced `TestCase.run`, a pytest hook, a plugin, a forged log)
 * reports the failing ones as passed, or the log loses them: then the run is not graded.
 */

/** How a runner finds a canary: pytest (classes and functions), unittest and Django (classes), sympy (functions), R2E (a file in r2e_tests/). */
export type CanaryKind = 'pytest' | 'unittest' | 'django' | 'sympy' | 'r2e';

/** The canary kind of a parser's runner. */
export function canaryKind(parser: LogParserName): CanaryKind {
  if (parser === 'unittest' || parser === 'django' || parser === 'sympy' || parser === 'r2e') return parser;
  return 'pytest';
}

/** Canaries of one grading run. */
export interface Canary {
  /** Files to write (repository-relative path → content), after the test patch. */
  files: Record<string, string>;
  /** Arguments added to the test command (a path, a module, a Django label). */
  args: string[];
  /** Names (unique in the log) of the tests that must pass, and of those that must fail. */
  pass: string[];
  fail: string[];
}

/** Where canaries go: a directory of the repository, and for Django the test app it belongs to. */
export interface CanaryAnchor {
  /** Repository-relative directory ('.' for the root). */
  dir: string;
  /** Django: the app label `dir` is (`tests/<app>`), or undefined to make a new app under tests/. */
  djangoApp?: string;
}

const LETTERS = 'abcdefghijklmnopqrstuvwxyz';

/** A random lower-case word of `n` letters. */
function word(n: number, bytes: (n: number) => Buffer): string {
  return [...bytes(n)].map((b) => LETTERS[b % 26]).join('');
}

/** Makes the canaries of one grading run (`bytes` is the randomness, injectable for tests). */
export function makeCanary(kind: CanaryKind, anchor: CanaryAnchor, bytes: (n: number) => Buffer = randomBytes): Canary {
  const w = (): string => word(10, bytes);
  const mod = `test_${w()}`;
  const cls = `Test${w().replace(/^./, (c) => c.toUpperCase())}`;
  const passM = `test_${w()}`;
  const failM = `test_${w()}`;
  const passF = `test_${w()}`;
  const failF = `test_${w()}`;
  const klass = [
    'import unittest',
    '',
    '',
    `class ${cls}(unittest.TestCase):`,
    `    def ${passM}(self):`,
    '        self.assertTrue(True)',
    '',
    `    def ${failM}(self):`,
    `        self.fail(${JSON.stringify(w())})`,
    '',
  ];
  const funcs = ['', `def ${passF}():`, '    assert True', '', '', `def ${failF}():`, `    assert False, ${JSON.stringify(w())}`, ''];
  const join = (dir: string, f: string): string => (dir === '.' ? f : path.posix.join(dir, f));
  switch (kind) {
    case 'pytest':
    case 'r2e': {
      const file = join(kind === 'r2e' ? 'r2e_tests' : anchor.dir, `${mod}.py`);
      return {
        files: { [file]: [...klass, '', ...funcs].join('\n') },
        args: kind === 'r2e' ? [] : [file],
        pass: [passM, passF],
        fail: [failM, failF],
      };
    }
    case 'sympy': {
      const file = join(anchor.dir, `${mod}.py`);
      return { files: { [file]: funcs.slice(1).join('\n') }, args: [file], pass: [passF], fail: [failF] };
    }
    case 'unittest': {
      const file = join(anchor.dir, `${mod}.py`);
      const dotted = anchor.dir === '.' ? mod : `${anchor.dir.replaceAll('/', '.')}.${mod}`;
      return { files: { [file]: klass.join('\n') }, args: [/^[\w.]+$/.test(dotted) ? dotted : file], pass: [passM], fail: [failM] };
    }
    case 'django': {
      if (anchor.djangoApp)
        return {
          files: { [`tests/${anchor.djangoApp}/${mod}.py`]: klass.join('\n') },
          args: [`${anchor.djangoApp}.${mod}`],
          pass: [passM],
          fail: [failM],
        };
      // A new test app: runtests.py installs the app a label names.
      const app = w();
      return {
        files: { [`tests/${app}/__init__.py`]: '', [`tests/${app}/tests.py`]: klass.join('\n') },
        args: [app],
        pass: [passM],
        fail: [failM],
      };
    }
  }
}

/** What the log says of the canaries. */
export interface CanaryVerdict {
  /** Every canary reported, the passing ones PASSED, the failing ones FAILED or ERROR. */
  expected: boolean;
  /** A canary that must fail was reported passing (PASSED or XFAIL): the reports are forged. */
  forged: boolean;
  /** Each canary's status (the worst of its entries), MISSING when the log has none. */
  statuses: Record<string, string>;
}

/**
 * Reads the canaries' outcome from a parsed log (an entry belongs to a canary when its key holds
 * the canary's random name, whatever form the parser gives the key) and the map without them.
 */
export function checkCanary(c: Canary, sm: StatusMap): { verdict: CanaryVerdict; rest: StatusMap } {
  const names = [...c.pass, ...c.fail];
  const seen = new Map<string, string[]>(names.map((n) => [n, []]));
  const rest: StatusMap = new Map();
  for (const [k, v] of sm) {
    const n = names.find((x) => k.includes(x));
    if (n) seen.get(n)!.push(v);
    else rest.set(k, v);
  }
  const statuses: Record<string, string> = {};
  let expected = true;
  let forged = false;
  for (const n of c.pass) {
    const s = seen.get(n)!;
    statuses[n] = s.length === 0 ? 'MISSING' : (s.find((x) => x !== 'PASSED') ?? 'PASSED');
    if (statuses[n] !== 'PASSED') expected = false;
  }
  for (const n of c.fail) {
    const s = seen.get(n)!;
    const passed = s.some((x) => x === 'PASSED' || x === 'XFAIL');
    statuses[n] = s.length === 0 ? 'MISSING' : passed ? (s.find((x) => x === 'PASSED' || x === 'XFAIL') as string) : s[0]!;
    if (passed) forged = true;
    if (s.length === 0 || !s.every((x) => x === 'FAILED' || x === 'ERROR')) expected = false;
  }
  return { verdict: { expected, forged, statuses }, rest };
}
