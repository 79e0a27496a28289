// A tiny upstream Python repository made with git at test time, shared by the swe tests and the
// conformance suite: a base commit with a bug in add(), then the upstream fix with its test.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/** git with a fixed identity and default branch, in `cwd`; its stdout, trimmed. */
export const git = (cwd: string, ...args: string[]): string =>
  execFileSync('git', ['-c', 'user.name=raas', '-c', 'user.email=raas@localhost', '-c', 'init.defaultBranch=main', ...args], {
    cwd,
    encoding: 'utf8',
  }).trim();

export const CALC = '"""A tiny calculator."""\n\n\ndef add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n';
export const TESTS =
  'import unittest\n\nfrom calc import sub\n\n\nclass CalcTest(unittest.TestCase):\n    def test_sub(self):\n        self.assertEqual(sub(5, 3), 2)\n';
export const TESTS_AFTER =
  'import unittest\n\nfrom calc import add, sub\n\n\nclass CalcTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n    def test_sub(self):\n        self.assertEqual(sub(5, 3), 2)\n';
export const F2P = 'tests.test_calc.CalcTest.test_add';
export const P2P = 'tests.test_calc.CalcTest.test_sub';

/**
 * Makes the upstream repository in `dir`: a base commit with the bug, then the fix with its test (the
 * "future" the model must not see). Returns the base and fix commits, the test patch and the gold patch.
 */
export function makeUpstream(dir: string): { base: string; fix: string; testPatch: string; goldPatch: string } {
  fs.mkdirSync(path.join(dir, 'calc'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'tests'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'calc', '__init__.py'), CALC);
  fs.writeFileSync(path.join(dir, 'tests', '__init__.py'), '');
  fs.writeFileSync(path.join(dir, 'tests', 'test_calc.py'), TESTS);
  git(dir, 'init', '-q', '.');
  git(dir, 'add', '-A');
  git(dir, 'commit', '-q', '-m', 'calc with a bug');
  const base = git(dir, 'rev-parse', 'HEAD');
  fs.writeFileSync(path.join(dir, 'tests', 'test_calc.py'), TESTS_AFTER);
  const testPatch = git(dir, 'diff') + '\n';
  git(dir, 'checkout', '-q', '--', 'tests');
  fs.writeFileSync(path.join(dir, 'calc', '__init__.py'), CALC.replace('return a - b\n\n\ndef sub', 'return a + b\n\n\ndef sub'));
  const goldPatch = git(dir, 'diff') + '\n';
  fs.writeFileSync(path.join(dir, 'tests', 'test_calc.py'), TESTS_AFTER);
  git(dir, 'commit', '-q', '-am', 'fix add (the upstream fix)');
  return { base, fix: git(dir, 'rev-parse', 'HEAD'), testPatch, goldPatch };
}
