/**
 * The log parsers grading can use, by name, and the parser SWE-bench and SWE-Gym use for each
 * repository (MAP_REPO_TO_PARSER_PY, swebench/harness/log_parsers/python.py@726c546:253-289; SWE-Gym's
 * additions, SWE-Gym/SWE-Bench-Fork swebench/harness/log_parsers.py@242429c:314-375, keyed in lower case).
 * Every parser reads a log once, line by line: its cost is linear in the log, which grading bounds
 * (handlers.swe.max_log_bytes).
 */
import { parseLogDjango } from './django.js';
import {
  parseLogMatplotlib,
  parseLogPytest,
  parseLogPytestOptions,
  parseLogPytestPydantic,
  parseLogPytestV2,
  parseLogSeaborn,
} from './pytest.js';
import { parseLogR2e } from './r2e.js';
import { parseLogSympy } from './sympy.js';
import { parseLogUnittest } from './unittest.js';
import type { StatusMap } from './text.js';

export type { StatusMap } from './text.js';
export { r2eMatches, cleanR2eOutput } from './r2e.js';

/** A log parser: the test log in, each test's status (PASSED, FAILED, SKIPPED, ERROR, XFAIL) out. */
export type LogParser = (log: string) => StatusMap;

/** Parser names an instance (`log_parser`) or the server config may give. */
export const LOG_PARSERS = {
  pytest: parseLogPytest,
  pytest_options: parseLogPytestOptions,
  pytest_v2: parseLogPytestV2,
  pytest_pydantic: parseLogPytestPydantic,
  django: parseLogDjango,
  sympy: parseLogSympy,
  seaborn: parseLogSeaborn,
  matplotlib: parseLogMatplotlib,
  unittest: parseLogUnittest,
  r2e: parseLogR2e,
} as const satisfies Record<string, LogParser>;
export type LogParserName = keyof typeof LOG_PARSERS;

/** SWE-bench's repository → parser (python.py@726c546:270-289 with the aliases of 253-267). */
const SWEBENCH: Readonly<Record<string, LogParserName>> = {
  'astropy/astropy': 'pytest_v2',
  'django/django': 'django',
  'marshmallow-code/marshmallow': 'pytest',
  'matplotlib/matplotlib': 'matplotlib',
  'mwaskom/seaborn': 'seaborn',
  'pallets/flask': 'pytest',
  'psf/requests': 'pytest_options',
  'pvlib/pvlib-python': 'pytest',
  'pydata/xarray': 'pytest',
  'pydicom/pydicom': 'pytest_options',
  'pylint-dev/astroid': 'pytest',
  'pylint-dev/pylint': 'pytest_options',
  'pytest-dev/pytest': 'pytest',
  'pyvista/pyvista': 'pytest',
  'scikit-learn/scikit-learn': 'pytest_v2',
  'sqlfluff/sqlfluff': 'pytest',
  'sphinx-doc/sphinx': 'pytest_v2',
  'sympy/sympy': 'sympy',
};

/** SWE-Gym's additions (log_parsers.py@242429c:314-371): all parse_log_pytest but pydantic's. */
const SWEGYM: Readonly<Record<string, LogParserName>> = {
  'python/mypy': 'pytest',
  'getmoto/moto': 'pytest',
  'conan-io/conan': 'pytest',
  'modin-project/modin': 'pytest',
  'project-monai/monai': 'pytest',
  'iterative/dvc': 'pytest',
  'dask/dask': 'pytest',
  'bokeh/bokeh': 'pytest',
  'mne-tools/mne-python': 'pytest',
  'hypothesisworks/hypothesis': 'pytest',
  'pydantic/pydantic': 'pytest_pydantic',
  'pandas-dev/pandas': 'pytest',
  'facebookresearch/hydra': 'pytest',
};

const BY_REPO: ReadonlyMap<string, LogParserName> = new Map(
  Object.entries({ ...SWEBENCH, ...SWEGYM }).map(([k, v]) => [k.toLowerCase(), v]),
);

/** The parser SWE-bench (or SWE-Gym) grades `repo` with (case-insensitive, as SWE-Gym keys them), else undefined. */
export function repoParser(repo: string): LogParserName | undefined {
  return BY_REPO.get(repo.toLowerCase());
}

/** Parses `log` with the named parser. */
export function parseLog(name: LogParserName, log: string): StatusMap {
  return LOG_PARSERS[name](log);
}
