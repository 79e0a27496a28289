import type { SweHandlerConfig, SweInstance } from '../../../protocol/tasks.js';

/** How grading runs tests: the command, and the arguments it takes for a list of test ids. */
export interface TestRunner {
  command: string;
  args(ids: readonly string[]): string[];
}

/**
 * SWE-bench's test commands by repository (`test_cmd` of MAP_REPO_VERSION_TO_SPECS_PY,
 * swebench/harness/constants/python.py@726c546: TEST_PYTEST = "pytest -rA" at line 9 (it redefines
 * line 2's), TEST_DJANGO line 5, TEST_SEABORN 7, TEST_SPHINX 11, TEST_SYMPY 12-14, TEST_ASTROPY_PYTEST 4).
 * ProRL grades with SWE-bench's eval script, so these are its commands too
 * (openhands/nvidia/swe_agent/utils.py@40c1d8a:528-541).
 */
const SWEBENCH_TEST_COMMANDS: Readonly<Record<string, string>> = {
  'astropy/astropy': 'pytest -rA',
  'django/django': './tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1',
  'matplotlib/matplotlib': 'pytest -rA',
  'marshmallow-code/marshmallow': 'pytest -rA',
  'mwaskom/seaborn': 'pytest --no-header -rA',
  'pallets/flask': 'pytest -rA',
  'psf/requests': 'pytest -rA',
  'pvlib/pvlib-python': 'pytest -rA',
  'pydata/xarray': 'pytest -rA',
  'pydicom/pydicom': 'pytest -rA',
  'pylint-dev/astroid': 'pytest -rA',
  'pylint-dev/pylint': 'pytest -rA',
  'pytest-dev/pytest': 'pytest -rA',
  'pyvista/pyvista': 'pytest -rA',
  'scikit-learn/scikit-learn': 'pytest -rA',
  'sphinx-doc/sphinx': 'tox --current-env -epy39 -v --',
  'sqlfluff/sqlfluff': 'pytest -rA',
  'sympy/sympy': "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose",
};

/** Versions whose command differs from their repository's (same file: astropy 0.1-1.3 at 603-605, django 1.9 at 178). */
const SWEBENCH_VERSION_COMMANDS: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  'astropy/astropy': Object.fromEntries(['0.1', '0.2', '0.3', '0.4', '1.1', '1.2', '1.3'].map((v) => [v, 'pytest -rA -vv -o console_output_style=classic --tb=no'])),
  'django/django': { '1.9': './tests/runtests.py --verbosity 2' },
};

/** The command of a SWE-bench row with no test_command: its repository's, else pytest's. */
export function sweBenchTestCommand(repo: string, version?: string | number): string {
  const byVersion = version === undefined ? undefined : SWEBENCH_VERSION_COMMANDS[repo]?.[String(version)];
  return byVersion ?? SWEBENCH_TEST_COMMANDS[repo] ?? 'pytest -rA';
}

/**
 * Django's runner takes `module.Class.test_name`; SWE-bench lists Django tests as unittest prints
 * them, `test_name (module.Class)` (Python 3.11+: `test_name (module.Class.test_name)`).
 */
export function djangoTestLabel(id: string): string {
  const m = /^(\w+) \(([\w.]+)\)/.exec(id);
  if (!m) return id;
  const [, name, where] = m as unknown as [string, string, string];
  return where.endsWith(`.${name}`) ? where : `${where}.${name}`;
}

/**
 * The runner for an instance: its own `test_command`; else `handlers.swe.test_command`; else, for
 * a SWE-bench row (repo + base_commit, no files), SWE-bench's command for the repository (Django's
 * test ids turned into labels its runner takes); else `python3 -m unittest`. Test ids are appended
 * as arguments.
 */
export function testRunner(inst: SweInstance, cfg: SweHandlerConfig): TestRunner {
  const same = (ids: readonly string[]): string[] => [...ids];
  const command = inst.test_command ?? cfg.test_command;
  if (command) return { command, args: same };
  if (inst.files === undefined && inst.tarball === undefined && inst.repo) {
    return { command: sweBenchTestCommand(inst.repo, inst.version), args: inst.repo === 'django/django' ? (ids) => ids.map(djangoTestLabel) : same };
  }
  return { command: 'python3 -m unittest', args: same };
}
