import type { SweInstance } from '../../../protocol/tasks.js';

/**
 * What grading resets to the base commit after the model's patch, so a patch that rewrites the
 * tests gains nothing (SWE-bench does the same with the files its test patch touches):
 * - `F:path` (forced): `instance.test_files` and the files `instance.test_patch` touches. Reset to
 *   the base commit: restored when the base has them, removed when it does not.
 * - `K:path` (known tests): the files the test ids name (`tests.test_core.TestX.test_y`,
 *   `tests/test_core.py::test_y`), reset only when the base commit has them (an id's dotted
 *   prefixes are tried, most of them name nothing).
 * For every reset path the `conftest.py` of each directory above it, and the `__init__.py` of
 * directories named like tests, are reset too (pytest and unittest run them before any test).
 */

/** A repository path as git and rm take it: no leading `./`, no trailing `/`. */
export function cleanPath(p: string): string {
  return p.replace(/^(\.\/)+/, '').replace(/\/+$/, '');
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

/** The reset entries for an instance, given the paths its test patch touches. */
export function resetEntries(inst: SweInstance, testPatchPaths: readonly string[]): string[] {
  const forced = new Set([...(inst.test_files ?? []), ...testPatchPaths].map(cleanPath).filter(safePath));
  const known = new Set([...inst.FAIL_TO_PASS, ...inst.PASS_TO_PASS].flatMap(testFileCandidates).filter((p) => !forced.has(p)));
  return [...[...forced].map((p) => `F:${p}`), ...[...known].map((p) => `K:${p}`)];
}

function safePath(p: string): boolean {
  return p !== '' && p !== '.' && !p.includes('\0') && !p.startsWith('/') && !p.split('/').some((s) => s === '..' || s === '.git');
}

/**
 * The reset, as a bash script over the entries (`"$@"`); `g` is git (see repo.ts). `rm -rf` first
 * clears whatever the patch put there (a file, a directory, a symlink); `git checkout` then
 * writes the base version, replacing a symlinked parent directory with a real one.
 */
export const RESET_SCRIPT = `
reset() {
  rm -rf -- "$1" || return 1
  if g cat-file -e "HEAD:$1" 2>/dev/null; then g checkout -q HEAD -- "$1" || return 1; fi
}
for a in "$@"; do
  p=\${a#?:}
  case $a in K:*) g cat-file -e "HEAD:$p" 2>/dev/null || continue ;; esac
  reset "$p" || { echo "cannot reset $p to the base commit" >&2; exit 3; }
  d=$p
  while [ "$d" != "\${d%/*}" ]; do
    d=\${d%/*}
    reset "$d/conftest.py" || exit 3
    case \${d##*/} in *test*) reset "$d/__init__.py" || exit 3 ;; esac
  done
done
reset conftest.py || exit 3
`;

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

/** Test ids quoted for a bash command line. */
export function quoteIds(ids: readonly string[]): string {
  return ids.map((t) => `'${t.replace(/'/g, `'\\''`)}'`).join(' ');
}
