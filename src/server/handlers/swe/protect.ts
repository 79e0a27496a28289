import path from 'node:path';
import type { SweInstance } from '../../../protocol/tasks.js';

/**
 * What grading resets to the base commit after the model's patch, so a patch that rewrites the
 * tests gains nothing (SWE-bench does the same with the files its test patch touches):
 * - `instance.test_files` and the files `instance.test_patch` touches, whether or not the base
 *   commit has them (absent there: removed);
 * - the files the test ids name (`tests.test_core.TestX.test_y`, `tests/test_core.py::test_y`)
 *   that the base commit has (an id's dotted prefixes are tried, most of them name nothing);
 * - for each of those, the `conftest.py` of every directory above it, and the `__init__.py` of
 *   directories named like tests (pytest and unittest run them before any test), and the root
 *   `conftest.py`;
 * - what would be imported instead of such a test module: a package directory of its name, and the
 *   files the model's patch adds beside it under its name (`test_x.so`, `test_x.pyc`), which Python's
 *   import system would find before or instead of `test_x.py`.
 */

/** A repository path as git and rm take it: no leading `./`, no trailing `/`. */
function cleanPath(p: string): string {
  return path.posix.normalize(p).replace(/\/+$/, '');
}

/** Files a test id may live in, most specific first. */
export function testFileCandidates(id: string): string[] {
  const out = new Set<string>();
  const node = id.split('::')[0]!.trim();
  if (node.endsWith('.py')) out.add(cleanPath(node));
  // Django and unittest's verbose form: "test_name (module.Class)".
  const paren = /\(([\w.]+)\)\s*$/.exec(id)?.[1];
  for (const dotted of [paren, node].filter((s): s is string => !!s && /^[\w.]+$/.test(s))) {
    const parts = dotted.split('.').filter(Boolean);
    for (let k = parts.length; k >= 1; k--) out.add(`${parts.slice(0, k).join('/')}.py`);
  }
  return [...out].filter(safePath);
}

/** The reset: every path to remove, and those of them the base commit has (to check out again). */
export interface ResetPlan {
  remove: string[];
  restore: string[];
}

/** Plans the reset for an instance, from the paths its test patch and the model's patch touch and the base commit's files. */
export function resetPlan(
  inst: SweInstance,
  testPatchPaths: readonly string[],
  baseFiles: readonly string[],
  modelPatchPaths: readonly string[] = [],
): ResetPlan {
  const files = new Set(baseFiles);
  const dirs = new Set<string>();
  for (const f of baseFiles) for (let i = f.indexOf('/'); i > 0; i = f.indexOf('/', i + 1)) dirs.add(f.slice(0, i));
  const named = [...(inst.test_files ?? []), ...testPatchPaths].map(cleanPath).filter(safePath);
  const known = [...inst.FAIL_TO_PASS, ...inst.PASS_TO_PASS].flatMap(testFileCandidates).filter((p) => files.has(p));
  const all = new Set<string>(['conftest.py']);
  for (const p of [...named, ...known]) {
    all.add(p);
    for (let d = path.posix.dirname(p); d !== '.' && d !== '/'; d = path.posix.dirname(d)) {
      all.add(`${d}/conftest.py`);
      if (/test/i.test(path.posix.basename(d))) all.add(`${d}/__init__.py`);
    }
  }
  const added = modelPatchPaths.map(cleanPath).filter(safePath);
  for (const p of known) {
    if (!p.endsWith('.py')) continue;
    const stem = p.slice(0, -'.py'.length);
    all.add(stem);
    for (const q of added) if (q !== p && q.startsWith(`${stem}.`) && !q.includes('/', stem.length)) all.add(q);
  }
  const remove = [...all].sort();
  return { remove, restore: remove.filter((p) => files.has(p) || dirs.has(p)) };
}

function safePath(p: string): boolean {
  return p !== '' && p !== '.' && !p.includes('\0') && !p.startsWith('/') && !p.split('/').some((s) => s === '..' || s === '.git');
}

/** Paths of a `git apply --numstat -z` answer (both sides of a rename). */
export function numstatPaths(out: string): string[] {
  const paths: string[] = [];
  const fields = out.split('\0');
  for (let i = 0; i < fields.length; i++) {
    const f = fields[i]!;
    if (f === '') continue;
    const m = /^[-\d]+\t[-\d]+\t(.*)$/s.exec(f);
    if (!m) continue;
    if (m[1] !== '') paths.push(m[1]!);
    else {
      // A rename or copy: the pre- and post-image names follow as their own fields.
      if (fields[i + 1]) paths.push(fields[i + 1]!);
      if (fields[i + 2]) paths.push(fields[i + 2]!);
      i += 2;
    }
  }
  return paths;
}

/**
 * Python run in the grading sandbox after the model's patch: names the entries the patch added at
 * the repository root that shadow a standard-library module (a `unittest.py` there replaces the
 * test runner `python3 -m unittest` imports). The base commit's root names come on stdin.
 */
export const SHADOW_CHECK = `
import os, sys
base = set(sys.stdin.read().split('\\n'))
harmless = {'test', 'idlelib', 'tkinter', 'turtledemo', 'this', 'antigravity'}
for name in sorted(os.listdir('.')):
    if name in base or name.startswith('.'):
        continue
    mod = name.split('.')[0] if os.path.isfile(name) and name.endswith(('.py', '.pyc', '.so')) else name
    if os.path.isdir(name) or name != mod:
        if mod in sys.stdlib_module_names and mod not in harmless:
            print(name)
`;
