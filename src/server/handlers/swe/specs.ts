/**
 * What SWE-bench's and SWE-Gym's eval scripts run for a row: the repository's test command at its
 * version (the `test_cmd` of MAP_REPO_VERSION_TO_SPECS) and the test directives taken from the
 * row's test_patch. Carried here as data, read from SWE-bench's harness at 726c546
 * (swebench/harness/constants/python.py@726c546) and SWE-Gym's fork at 242429c
 * (SWE-Gym/SWE-Bench-Fork swebench/harness/constants.py@242429c).
 */

/** `test_cmd` by repository, for every version but those in VERSION_COMMANDS. */
const TEST_COMMANDS: Readonly<Record<string, string>> = {
  // SWE-bench: TEST_PYTEST is "pytest -rA" (python.py@726c546:9 redefines line 2's), TEST_DJANGO line 5,
  // TEST_SEABORN 7, TEST_SPHINX 11, TEST_SYMPY 12-14, and the SPECS_* tables that use them.
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
  // SWE-Gym (constants.py@242429c: TEST_MOTO 1703, TEST_CONAN 1720, TEST_DASK 1758, TEST_MONAI 1776,
  // TEST_DVC 1796, TEST_BOKEH 1832, TEST_MODIN 1886, TEST_HYPOTHESIS 1928, TEST_PYDANTIC 1946,
  // TEST_PANDAS 1984, TEST_HYDRA 2003; mypy's SPECS_MYPY 1621-1700).
  'getmoto/moto': 'pytest -n0 -rA',
  'conan-io/conan': 'pytest -n0 -rA',
  'dask/dask': 'pytest -n0 -rA  --color=no',
  'project-monai/monai': 'pytest -rA ',
  'iterative/dvc': 'pytest -rA',
  'bokeh/bokeh': 'pytest -rA -n0',
  'modin-project/modin': 'pytest -n0 -rA',
  'hypothesisworks/hypothesis': 'pytest -n0 -rA --tb=no --no-header',
  'pydantic/pydantic': 'pytest -rA --tb=short -vv -o console_output_style=classic --no-header',
  'pandas-dev/pandas': 'pytest -rA --tb=long',
  'facebookresearch/hydra': 'pytest -rA --tb=long',
  'python/mypy': 'pytest -n0 -rA -k',
};

/** Versions whose command differs from their repository's (python.py@726c546: astropy 0.1-1.3 at 603-605, django 1.9 at 178; mypy 1.7-1.11 at constants.py@242429c:1621-1637). */
const VERSION_COMMANDS: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  'astropy/astropy': Object.fromEntries(
    ['0.1', '0.2', '0.3', '0.4', '1.1', '1.2', '1.3'].map((v) => [v, 'pytest -rA -vv -o console_output_style=classic --tb=no']),
  ),
  'django/django': { '1.9': './tests/runtests.py --verbosity 2' },
  'python/mypy': Object.fromEntries(['1.7', '1.8', '1.9', '1.10', '1.11'].map((v) => [v, 'pytest -rA -k'])),
};

/**
 * The environment SWE-bench's Django eval scripts export first (`eval_commands`, python.py@726c546:
 * versions 1.7-2.2 and 3.0-3.2; the locale generation of 3.x is the image's business).
 */
const DJANGO_ENV_VERSIONS = new Set(['1.7', '1.8', '1.9', '1.10', '1.11', '2.0', '2.1', '2.2', '3.0', '3.1', '3.2']);
const DJANGO_ENV = { LANG: 'en_US.UTF-8', LC_ALL: 'en_US.UTF-8', PYTHONIOENCODING: 'utf8', LANGUAGE: 'en_US:en' };

/** The command SWE-bench (or SWE-Gym) runs for `repo` at `version`, else undefined for a repository neither knows. */
export function specTestCommand(repo: string, version?: string | number): string | undefined {
  const key = repo.toLowerCase();
  const v = version === undefined ? undefined : String(version);
  const byVersion = v === undefined ? undefined : (VERSION_COMMANDS[repo]?.[v] ?? VERSION_COMMANDS[key]?.[v]);
  return byVersion ?? TEST_COMMANDS[repo] ?? TEST_COMMANDS[key];
}

/** The variables SWE-bench's eval script exports before the tests of `repo` at `version`. */
export function specTestEnv(repo: string, version?: string | number): Record<string, string> {
  return repo === 'django/django' && version !== undefined && DJANGO_ENV_VERSIONS.has(String(version)) ? { ...DJANGO_ENV } : {};
}

/** SWE-bench's NON_TEST_EXTS (constants/__init__.py@726c546:108-120); "csv" has no dot there. */
const NON_TEST_EXTS = ['.json', '.png', 'csv', '.txt', '.md', '.jpg', '.jpeg', '.pkl', '.yml', '.yaml', '.toml'];

/**
 * `re.findall(r"diff --git a/.* b/(.*)", test_patch)`: per line, the first `diff --git a/` and the
 * text after the line's last ` b/` past it (the greedy `.*`; `.` stops at a newline, so at most one
 * match per line). One pass.
 */
export function diffTargets(patch: string): string[] {
  const out: string[] = [];
  const head = 'diff --git a/';
  for (let at = patch.indexOf(head); at >= 0; ) {
    const eol = patch.indexOf('\n', at);
    const end = eol < 0 ? patch.length : eol;
    const b = patch.lastIndexOf(' b/', end - 3);
    if (b >= at + head.length) out.push(patch.slice(b + 3, end));
    if (eol < 0) break;
    at = patch.indexOf(head, eol + 1);
  }
  return out;
}

/**
 * `get_test_directives` (test_spec/python.py@726c546:230-261): the files test_patch changes, less
 * non-test files; for Django, module labels (`tests/a/b.py` → `a.b`).
 */
export function testDirectives(repo: string, testPatch: string | undefined): string[] {
  if (!testPatch) return [];
  const directives = diffTargets(testPatch).filter((d) => !NON_TEST_EXTS.some((ext) => d.endsWith(ext)));
  if (repo !== 'django/django') return directives;
  return directives.map((d) => {
    let x = d.endsWith('.py') ? d.slice(0, -3) : d;
    x = x.startsWith('tests/') ? x.slice('tests/'.length) : x;
    return x.replaceAll('/', '.');
  });
}

/**
 * SWE-Gym's mypy command: `-k` with the test cases test_patch adds, `[case name]` in mypy's data
 * files, joined with ` or ` and quoted (test_spec.py@242429c:247-253).
 */
export function mypyKeys(testPatch: string | undefined): string {
  const keys = [...(testPatch ?? '').matchAll(/\[case ([^\]]+)\]/g)].map((m) => m[1]!);
  return keys.join(' or ');
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
