// The test-log parsers and the resolution rules of swe grading, against SWE-bench's harness:
//   sb  = SWE-bench/SWE-bench @ 726c5461 (swebench 4.1.0)
//   sg  = SWE-Gym/SWE-Bench-Fork @ 242429c1
//   r2e = R2E-Gym/R2E-Gym @ 69bc9535
// and against the real output of the test runners (pytest and unittest run here, by /usr/bin/python3).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { LOG_PARSERS, parseLog, repoParser, type LogParserName } from '../../src/server/handlers/swe/parsers/index.js';
import { optionName } from '../../src/server/handlers/swe/parsers/pytest.js';
import { failureHeader } from '../../src/server/handlers/swe/parsers/sympy.js';
import { r2eMatches } from '../../src/server/handlers/swe/parsers/r2e.js';
import { evalReport, evalTestsReport, resolutionStatus } from '../../src/server/handlers/swe/report.js';
import {
  diffTargets,
  djangoTestLabel,
  mypyKeys,
  specTestCommand,
  specTestEnv,
  testDirectives,
} from '../../src/server/handlers/swe/specs.js';
import { gradingPlan, impliedParser } from '../../src/server/handlers/swe/plan.js';
import { checkCanary, makeCanary } from '../../src/server/handlers/swe/canary.js';
import { SWE_LOG_PARSERS } from '../../src/protocol/tasks.js';
import { sweHandler } from '../../src/server/handlers/swe/index.js';
import { parseInstance } from './helpers.js';

const HERE = path.dirname(new URL(import.meta.url).pathname);
const m = (o: Record<string, string>): Map<string, string> => new Map(Object.entries(o));
const obj = (x: Map<string, string>): Record<string, string> => Object.fromEntries(x);

describe('log parsers give what the harness parsers give', () => {
  // The fixture holds 300 random logs built from the tokens the parsers' rules test (status words,
  // " - ", brackets, option paths, " ... ok" and its kin, FAIL:/ERROR: headers, sympy's "_ x.py:y _"
  // headers, the three multi-line Django messages, colour codes, control characters, the Unicode
  // spaces Python and JavaScript disagree on) and what these parsers answered for each when run:
  // sb swebench/harness/log_parsers/python.py:7-250, sg swebench/harness/log_parsers.py:244-273,
  // r2e src/r2egym/repo_analysis/execution_log_parser.py:4-35. A null answer: the Python raised
  // (an IndexError on a line that is only a status word); ours skips such a line instead.
  const cases = JSON.parse(fs.readFileSync(path.join(HERE, 'fixtures/swebench-parser-cases.json'), 'utf8')) as Array<
    Record<string, unknown> & { log: string }
  >;
  const names: Record<string, LogParserName> = {
    parse_log_pytest: 'pytest',
    parse_log_pytest_options: 'pytest_options',
    parse_log_pytest_v2: 'pytest_v2',
    parse_log_django: 'django',
    parse_log_sympy: 'sympy',
    parse_log_seaborn: 'seaborn',
    parse_log_matplotlib: 'matplotlib',
    parse_log_pytest_pydantic: 'pytest_pydantic',
    r2e: 'r2e',
  };

  it("on every fixture log, each parser answers the harness parser's map", () => {
    expect(cases.length).toBe(300);
    let compared = 0;
    let nonEmpty = 0;
    for (const c of cases) {
      for (const [up, ours] of Object.entries(names)) {
        const want = c[up] as Record<string, string> | null;
        if (want === null) continue;
        expect(obj(parseLog(ours, c.log)), `${up} on ${JSON.stringify(c.log)}`).toEqual(want);
        compared++;
        if (Object.keys(want).length) nonEmpty++;
      }
    }
    expect(compared).toBeGreaterThan(2500);
    expect(nonEmpty, 'most comparisons found tests').toBeGreaterThan(500);
  });

  it('knows every parser the instance schema names, and the repository map of SWE-bench and SWE-Gym', () => {
    expect(Object.keys(LOG_PARSERS).sort()).toEqual([...SWE_LOG_PARSERS].sort());
    // sb python.py:270-289 (with the aliases of 253-267); sg log_parsers.py:314-375 (lower-cased keys).
    expect(repoParser('django/django')).toBe('django');
    expect(repoParser('sympy/sympy')).toBe('sympy');
    expect(repoParser('psf/requests')).toBe('pytest_options');
    expect(repoParser('astropy/astropy')).toBe('pytest_v2');
    expect(repoParser('sphinx-doc/sphinx')).toBe('pytest_v2');
    expect(repoParser('matplotlib/matplotlib')).toBe('matplotlib');
    expect(repoParser('mwaskom/seaborn')).toBe('seaborn');
    expect(repoParser('pydata/xarray')).toBe('pytest');
    expect(repoParser('Project-MONAI/MONAI')).toBe('pytest');
    expect(repoParser('pydantic/pydantic')).toBe('pytest_pydantic');
    expect(repoParser('getmoto/moto')).toBe('pytest');
    expect(repoParser('someone/else')).toBeUndefined();
  });

  it("the regular expressions they emulate: option paths, sympy headers, pydantic's FAILED [..]", () => {
    // sb python.py:38, 48-57: re.search(r"(.*?)\[(.*)\]") and the path rule.
    expect(optionName('test_a[/tmp/x/y]')).toBe('test_a[/y]');
    expect(optionName('test_a[//net/x]')).toBe('test_a[//net/x]');
    expect(optionName('test_a[/tmp/*.py]')).toBe('test_a[/tmp/*.py]');
    expect(optionName('t[a][b]')).toBe('t[a][b]');
    expect(optionName('t[a')).toBe('t[a');
    expect(optionName('t]a[')).toBe('t]a[');
    // sb python.py:209: r"(_*) (.*)\.py:(.*) (_*)".
    expect(failureHeader('____ sympy/core/tests/test_a.py:test_b ____')).toBe('sympy/core/tests/test_a.py:test_b');
    expect(failureHeader('x a.py:b')).toBeUndefined();
    expect(failureHeader(' a.py:b.py:c d e')).toBe('a.py:b.py:c d');
    // sg log_parsers.py:260: re.sub(r"FAILED\s*\[.*?\]", "FAILED", line) before the status test.
    expect(obj(parseLog('pytest_pydantic', 'tests/a.py::t FAILED [ 50%]\ntests/a.py::u PASSED [100%]'))).toEqual({
      'tests/a.py::t': 'FAILED',
    }); // "u PASSED [100%]" ends with no status word: not read
  });
});

/** Runs `argv` in `dir` with the host's Debian python3; stdout and stderr as one stream, as the harness logs them. */
function run(dir: string, argv: string[]): string {
  const r = spawnSync('bash', ['-c', 'exec 2>&1; "$@"', 'x', ...argv], {
    cwd: dir,
    encoding: 'utf8',
    env: { PATH: '/usr/bin:/bin', HOME: dir, PYTHONDONTWRITEBYTECODE: '1' },
  });
  return r.stdout;
}

const SUITE = [
  'import unittest',
  'import pytest',
  '',
  'def test_ok():',
  '    assert 1',
  '',
  'def test_bad():',
  '    assert 0, "a - b"',
  '',
  '@pytest.mark.skip(reason="no")',
  'def test_skip():',
  '    pass',
  '',
  '@pytest.mark.xfail',
  'def test_xfail():',
  '    assert 0',
  '',
  '@pytest.fixture',
  'def broken():',
  '    raise RuntimeError("fixture")',
  '',
  'def test_error(broken):',
  '    pass',
  '',
  '@pytest.mark.parametrize("p", ["/tmp/a/b", "x y"])',
  'def test_param(p):',
  '    print("out", p)',
  '',
  'class TestK(unittest.TestCase):',
  '    def test_m(self):',
  '        """Docstring first line."""',
  '        print("noise")',
  '        self.assertEqual(1, 2)',
  '',
  '    def test_n(self):',
  '        for i in range(2):',
  '            with self.subTest(i=i):',
  '                self.assertEqual(i, 0)',
  '',
  '    def test_o(self):',
  '        import sys',
  '        sys.stderr.write("pushed\\n")',
  '',
  '    @unittest.skip("why")',
  '    def test_s(self):',
  '        pass',
  '',
  '    @unittest.expectedFailure',
  '    def test_x(self):',
  '        self.assertEqual(1, 2)',
  '',
].join('\n');

describe('on the real output of the runners (pytest and unittest, Debian python3)', () => {
  const have = spawnSync('/usr/bin/python3', ['-c', 'import pytest'], { stdio: 'ignore' }).status === 0;

  it.skipIf(!have)('pytest -rA: parse_log_pytest, _options and _v2 read every outcome', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'raas-grading-pytest-'));
    try {
      fs.mkdirSync(path.join(dir, 'tests'));
      fs.writeFileSync(path.join(dir, 'tests/test_suite.py'), SUITE);
      const log = run(dir, ['/usr/bin/python3', '-m', 'pytest', '-rA', '-p', 'no:cacheprovider', 'tests/test_suite.py']);
      const t = (n: string): string => `tests/test_suite.py::${n}`;
      const want = {
        [t('test_ok')]: 'PASSED',
        [t('test_bad')]: 'FAILED',
        [t('test_xfail')]: 'XFAIL',
        [t('test_error')]: 'ERROR',
        [t('test_param[/tmp/a/b]')]: 'PASSED',
        [t('test_param[x')]: 'PASSED',
        [t('TestK::test_m')]: 'FAILED',
        [t('TestK::test_n')]: 'FAILED',
        [t('TestK::test_o')]: 'PASSED',
        [t('TestK::test_x')]: 'XFAIL',
      };
      const pytest = obj(parseLog('pytest', log));
      expect(pytest, log).toMatchObject(want);
      // Skips are listed as "SKIPPED [1] tests/test_suite.py:10: no": the harness keys them by "[1]".
      expect(
        Object.entries(pytest)
          .filter(([, v]) => v === 'SKIPPED')
          .map(([k]) => k),
      ).toEqual(['[1]']);
      const { [t('test_param[/tmp/a/b]')]: _path, ...rest } = want;
      const options = obj(parseLog('pytest_options', log));
      expect(options).toMatchObject({ ...rest, [t('test_param[/b]')]: 'PASSED' });
      expect(options[t('test_param[/tmp/a/b]')]).toBeUndefined();
      expect(obj(parseLog('pytest_v2', log))).toMatchObject(want);
      const verbose = run(dir, [
        '/usr/bin/python3',
        '-m',
        'pytest',
        '-rA',
        '-vv',
        '-o',
        'console_output_style=classic',
        '--tb=no',
        '-p',
        'no:cacheprovider',
        'tests/test_suite.py',
      ]);
      expect(obj(parseLog('pytest_v2', verbose)), verbose).toMatchObject(want);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('python -m unittest -v: docstrings, subtests, output before the status, skips and expected failures', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'raas-grading-unittest-'));
    try {
      fs.mkdirSync(path.join(dir, 'tests'));
      fs.writeFileSync(path.join(dir, 'tests/__init__.py'), '');
      fs.writeFileSync(
        path.join(dir, 'tests/test_k.py'),
        SUITE.replace('import pytest\n', '').split('\ndef test_ok')[0] + '\n' + SUITE.slice(SUITE.indexOf('class TestK')),
      );
      fs.writeFileSync(path.join(dir, 'tests/test_gone.py'), 'import nothing_here\n');
      const log = run(dir, ['/usr/bin/python3', '-m', 'unittest', '-v', 'tests.test_k', 'tests.test_gone']);
      expect(obj(parseLog('unittest', log)), log).toEqual({
        'tests.test_k.TestK.test_m': 'FAILED',
        'tests.test_k.TestK.test_n': 'FAILED',
        'tests.test_k.TestK.test_o': 'PASSED',
        'tests.test_k.TestK.test_s': 'SKIPPED',
        'tests.test_k.TestK.test_x': 'XFAIL',
        // A module that does not import is one ERROR of unittest's _FailedTest: its tests are missing, so failed.
        'unittest.loader._FailedTest.test_gone': 'ERROR',
      });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('resolution as get_eval_report computes it (sb grading.py)', () => {
  it('passed is PASSED or XFAIL; failed is FAILED, ERROR or missing; SKIPPED is neither (27-35, 123-128)', () => {
    const sm = m({ a: 'PASSED', b: 'XFAIL', c: 'FAILED', d: 'ERROR', e: 'SKIPPED' });
    expect(evalTestsReport(sm, ['a', 'b', 'c', 'd', 'e', 'f'], [])).toEqual({
      FAIL_TO_PASS: { success: ['a', 'b'], failure: ['c', 'd', 'f'] },
      PASS_TO_PASS: { success: [], failure: [] },
    });
  });

  it('FULL, PARTIAL, NO; an empty (or all-skipped) list counts as 1 (194-232)', () => {
    const rs = (f2p: string[], p2p: string[], sm: Record<string, string>) => resolutionStatus(evalTestsReport(m(sm), f2p, p2p));
    expect(rs(['a'], ['b'], { a: 'PASSED', b: 'PASSED' })).toBe('RESOLVED_FULL');
    expect(rs(['a', 'c'], ['b'], { a: 'PASSED', b: 'PASSED' })).toBe('RESOLVED_PARTIAL');
    expect(rs(['a', 'c'], ['b'], { a: 'PASSED' })).toBe('RESOLVED_NO');
    expect(rs(['a'], ['b'], { b: 'PASSED' })).toBe('RESOLVED_NO');
    expect(rs(['a'], [], { a: 'SKIPPED' })).toBe('RESOLVED_FULL');
    expect(rs([], [], {})).toBe('RESOLVED_FULL');
    expect(evalReport(m({ a: 'PASSED', b: 'PASSED' }), ['a'], ['b']).resolved).toBe(true);
    expect(evalReport(m({ a: 'PASSED' }), ['a', 'c'], []).resolved).toBe(false);
  });

  it('FAIL_ONLY repositories fail only on a FAILED entry (130-137; constants/__init__.py:129-133)', () => {
    expect(evalReport(m({ b: 'ERROR' }), ['a', 'b'], [], 'chartjs/Chart.js').status).toBe('RESOLVED_FULL');
    expect(evalReport(m({ a: 'FAILED' }), ['a'], [], 'chartjs/Chart.js').status).toBe('RESOLVED_NO');
  });

  it('R2E rows: the parsed map equals expected_output_json, keys cut at " - " (r2e docker.py:552-565)', () => {
    expect(r2eMatches(m({ 'C.t': 'PASSED', u: 'FAILED' }), m({ u: 'FAILED', 'C.t': 'PASSED' })).match).toBe(true);
    expect(r2eMatches(m({ 'C.t': 'PASSED', 'u - boom': 'FAILED' }), m({ u: 'FAILED', 'C.t': 'PASSED' })).match).toBe(true);
    expect(r2eMatches(m({ 'C.t': 'PASSED' }), m({ 'C.t': 'PASSED', u: 'FAILED' }))).toMatchObject({ match: false, missing: ['u'] });
    expect(r2eMatches(m({ 'C.t': 'FAILED', u: 'FAILED' }), m({ u: 'FAILED', 'C.t': 'PASSED' }))).toMatchObject({
      match: false,
      mismatched: ['C.t'],
    });
    expect(r2eMatches(m({ 'C.t': 'PASSED', v: 'FAILED' }), m({ u: 'FAILED', 'C.t': 'PASSED' }))).toMatchObject({
      match: false,
      extra: ['v'],
    });
    expect(r2eMatches(m({ '\x1b[31mC.t\x1b[0m': 'PASSED' }), m({ 'C.t': 'PASSED' })).match).toBe(true);
  });
});

describe('what the eval script runs (sb test_spec/python.py, constants/python.py; sg constants.py, test_spec.py)', () => {
  it('the test command by repository and version', () => {
    // sb constants/python.py: lines 5, 9, 11-14, 178, 603-605; sg constants.py:1621-1700, 1703-2003.
    expect(specTestCommand('django/django', '4.0')).toBe('./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1');
    expect(specTestCommand('django/django', '1.9')).toBe('./tests/runtests.py --verbosity 2');
    expect(specTestCommand('astropy/astropy', '1.3')).toBe('pytest -rA -vv -o console_output_style=classic --tb=no');
    expect(specTestCommand('astropy/astropy', '5.0')).toBe('pytest -rA');
    expect(specTestCommand('sympy/sympy', '1.12')).toMatch(
      /^PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin\/test -C --verbose$/,
    );
    expect(specTestCommand('sphinx-doc/sphinx', 5.0)).toBe('tox --current-env -epy39 -v --');
    expect(specTestCommand('Project-MONAI/MONAI', '1.0')).toBe('pytest -rA ');
    expect(specTestCommand('python/mypy', '1.8')).toBe('pytest -rA -k');
    expect(specTestCommand('python/mypy', '0.990')).toBe('pytest -n0 -rA -k');
    expect(specTestCommand('someone/else')).toBeUndefined();
    // sb constants/python.py, django 1.7-2.2 and 3.0-3.2 eval_commands.
    expect(specTestEnv('django/django', '3.2')).toMatchObject({ LANG: 'en_US.UTF-8', LC_ALL: 'en_US.UTF-8' });
    expect(specTestEnv('django/django', '4.0')).toEqual({});
  });

  it('directives from test_patch: re.findall(r"diff --git a/.* b/(.*)"), non-test files dropped, Django labels (230-261)', () => {
    const patch =
      'diff --git a/tests/a b/c.py b/tests/a b/c.py\n--- x\ndiff --git a/tests/forms_tests/tests/test_x.py b/tests/forms_tests/tests/test_x.py\n+diff --git a/q b/\ndiff --git a/docs/x.md b/docs/x.md\ndiff --git a/data.csv b/data.csv\n';
    expect(diffTargets(patch)).toEqual(['c.py', 'tests/forms_tests/tests/test_x.py', '', 'docs/x.md', 'data.csv']);
    expect(testDirectives('psf/requests', patch)).toEqual(['c.py', 'tests/forms_tests/tests/test_x.py', '']);
    expect(testDirectives('django/django', patch)).toEqual(['c', 'forms_tests.tests.test_x', '']);
    // sg test_spec.py:247-253: mypy's -k selection.
    expect(mypyKeys('+[case testA]\n+[case testB-skip]\n')).toBe('testA or testB-skip');
    expect(djangoTestLabel('test_x (a.b.C)\nLong description')).toBe('a.b.C.test_x');
  });

  it('the grading plan: command, parser and arguments per row kind', async () => {
    const row = async (extra: Record<string, unknown>) =>
      parseInstance<any>(sweHandler.instance, { problem_statement: 'x', FAIL_TO_PASS: ['test_a (m.C)'], ...extra });
    const sb = {
      repo: 'django/django',
      base_commit: 'a'.repeat(40),
      version: '3.0',
      test_patch: 'diff --git a/tests/m/tests.py b/tests/m/tests.py\n',
    };
    expect(gradingPlan(await row(sb), {})).toMatchObject({
      mode: 'log',
      parser: 'django',
      args: ['m.tests'],
      command: specTestCommand('django/django', '3.0'),
      env: { LANG: 'en_US.UTF-8' },
    });
    // A SWE-bench row without a test_patch: its ids as labels.
    expect(gradingPlan(await row({ ...sb, test_patch: undefined }), {}).args).toEqual(['m.C.test_a']);
    // test_cmd, SWE-bench's spelling; a list means its last entry (sb grading.py:55-56).
    expect(gradingPlan(await row({ ...sb, test_cmd: ['setup', 'python -m pytest -rA'] }), {}).command).toBe('python -m pytest -rA');
    expect(gradingPlan(await row({ files: { 'a.py': '' } }), {})).toMatchObject({
      mode: 'log',
      parser: 'unittest',
      command: 'python3 -m unittest -v',
      args: ['test_a (m.C)'],
    });
    expect(gradingPlan(await row({ files: { 'a.py': '' }, test_command: 'python3 -m unittest discover' }), {}).command).toBe(
      'python3 -m unittest -v discover',
    );
    expect(gradingPlan(await row({ files: { 'a.py': '' }, test_command: 'python3 -m pytest -q' }), {})).toMatchObject({
      parser: 'pytest',
      command: 'python3 -m pytest -q -rA',
    });
    expect(gradingPlan(await row({ files: { 'a.py': '' }, test_command: 'make check' }), {})).toMatchObject({
      mode: 'exit_status',
      command: 'make check',
    });
    expect(gradingPlan(await row({ files: { 'a.py': '' }, test_command: 'make check', log_parser: 'pytest' }), {})).toMatchObject({
      mode: 'log',
      parser: 'pytest',
    });
    expect(gradingPlan(await row({ files: { 'a.py': '' }, test_command: 'make check' }), { log_parser: 'django' })).toMatchObject({
      mode: 'log',
      parser: 'django',
    });
    expect(
      gradingPlan(await row({ repo: 'python/mypy', base_commit: 'a'.repeat(40), version: '1.8', test_patch: '+[case testA]\n' }), {}),
    ).toMatchObject({ command: 'pytest -rA -k', args: ['testA'], noCanaries: true });
    const r2e = await row({ repo: 'x/y', base_commit: 'a'.repeat(40), FAIL_TO_PASS: [], expected_output_json: '{"t": "PASSED"}' });
    expect(gradingPlan(r2e, {})).toMatchObject({ mode: 'log', parser: 'r2e', command: 'bash run_tests.sh', args: [], r2e: true });
    expect(impliedParser('PYTHONPATH=. /usr/bin/python3.11 -m unittest tests')?.command).toBe(
      'PYTHONPATH=. /usr/bin/python3.11 -m unittest -v tests',
    );
    expect(impliedParser('pytest -rfEA x')?.command).toBe('pytest -rfEA x');
    expect(impliedParser('tox -e py')).toBeUndefined();
    await expect(row({ files: {}, log_parser: 'nose' })).rejects.toThrow(/log_parser.*must be one of pytest/);
    await expect(parseInstance(sweHandler.instance, { problem_statement: 'x', files: {} })).rejects.toThrow(
      /FAIL_TO_PASS needs at least one test id/,
    );
  });
});

describe('tamper canaries', () => {
  let counter = 0;
  const seq = (n: number): Buffer => Buffer.from([...Array(n)].map(() => (counter = (counter * 31 + 17) % 251)));

  it('are named at random per grading, without a fixed prefix, and placed beside the tests', () => {
    const a = makeCanary('pytest', { dir: 'tests' });
    const b = makeCanary('pytest', { dir: 'tests' });
    expect(a.pass).not.toEqual(b.pass);
    const [file] = Object.keys(a.files);
    expect(file).toMatch(/^tests\/test_[a-z]{10}\.py$/);
    expect(a.args).toEqual([file]);
    for (const n of [...a.pass, ...a.fail]) expect(n).toMatch(/^test_[a-z]{10}$/);
    expect(makeCanary('unittest', { dir: 'pkg/tests' }, seq).args[0]).toMatch(/^pkg\.tests\.test_[a-z]{10}$/);
    expect(makeCanary('django', { dir: 'tests/m', djangoApp: 'm' }, seq).args[0]).toMatch(/^m\.test_[a-z]{10}$/);
    expect(Object.keys(makeCanary('django', { dir: 'tests' }, seq).files)).toEqual([
      expect.stringMatching(/^tests\/[a-z]{10}\/__init__\.py$/),
      expect.stringMatching(/^tests\/[a-z]{10}\/tests\.py$/),
    ]);
    const r2e = makeCanary('r2e', { dir: '.' }, seq);
    expect(r2e.args).toEqual([]);
    expect(Object.keys(r2e.files)).toEqual([expect.stringMatching(/^r2e_tests\/test_[a-z]{10}\.py$/)]);
  });

  it("as expected, forged, or lost: read from any parser's key form, and kept out of the graded map", () => {
    const c = makeCanary('pytest', { dir: '.' }, seq);
    const [p1, p2] = c.pass as [string, string];
    const [f1, f2] = c.fail as [string, string];
    const key = (n: string) => `test_q.py::${n}`;
    const honest = m({ [key(p1)]: 'PASSED', [key(p2)]: 'PASSED', [key(f1)]: 'FAILED', [`${f2} (a.B)`]: 'ERROR', real: 'PASSED' });
    expect(checkCanary(c, honest)).toEqual({
      verdict: { expected: true, forged: false, statuses: { [p1]: 'PASSED', [p2]: 'PASSED', [f1]: 'FAILED', [f2]: 'ERROR' } },
      rest: m({ real: 'PASSED' }),
    });
    expect(checkCanary(c, m({ [key(p1)]: 'PASSED', [key(p2)]: 'PASSED', [key(f1)]: 'PASSED', [key(f2)]: 'FAILED' })).verdict).toMatchObject(
      { expected: false, forged: true },
    );
    expect(checkCanary(c, m({ [key(p1)]: 'PASSED', [key(p2)]: 'PASSED', [key(f1)]: 'XFAIL', [key(f2)]: 'FAILED' })).verdict.forged).toBe(
      true,
    );
    expect(checkCanary(c, m({ real: 'PASSED' })).verdict).toMatchObject({ expected: false, forged: false, statuses: { [p1]: 'MISSING' } });
    expect(
      checkCanary(c, m({ [key(p1)]: 'PASSED', [key(p2)]: 'PASSED', [key(f1)]: 'SKIPPED', [key(f2)]: 'FAILED' })).verdict,
    ).toMatchObject({ expected: false, forged: false });
  });
});
