import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pLimit from 'p-limit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { sweHandler } from '../../src/server/handlers/swe/index.js';
import type { SweInstance } from '../../src/protocol/tasks.js';
import type { RunResult } from '../../src/server/handlers/types.js';
import { numstatPaths, resetPlan, testFileCandidates } from '../../src/server/handlers/swe/protect.js';
import { call, scriptPolicy } from '../agent/script-policy.js';
import { bwrapRuntime, parseInstance, readJsonl, stageContext } from './helpers.js';

// Grading the model cannot forge, and reads the model cannot redirect: the real rollout server
// (bwrap sandboxes as the sandbox user), the real simulated backend with scripted tool calls, and
// real attacks from inside the sandbox (symlinks, FIFOs, shell functions, forged output, patches
// that rewrite the tests).

const MARKER = `RAAS-SECRET-${randomUUID()}`;
// Unreachable from a sandbox; a program that would pass if it were read as the solution.
const SECRET = path.join(os.homedir(), `.raas-t-secret-${process.pid}`);
const SHADOW_LINE = (() => {
  try {
    return fs.readFileSync('/etc/shadow', 'utf8').split('\n')[0]!;
  } catch {
    return undefined;
  }
})();

const stats = readJsonl('swe.jsonl')[0]! as {
  files: Record<string, string>;
  FAIL_TO_PASS: string[];
  PASS_TO_PASS: string[];
  gold_patch: string;
  test_command: string;
};
const FIX = {
  path: '/workspace/stats/core.py',
  old_str: '    mid = len(s) // 2\n    return s[mid]\n',
  new_str: '    mid = len(s) // 2\n    if len(s) % 2 == 0:\n        return (s[mid - 1] + s[mid]) / 2\n    return s[mid]\n',
};
const bash = (command: string) => call('execute_bash', { command });
const edit = (args: Record<string, unknown>) => call('str_replace_editor', args);
const finish = call('finish', {});

const FORGE = [
  'import sys',
  'print(42)',
  'try:',
  "    with open('/dev/tty', 'w') as t:",
  "        t.write('exit=0\\n')",
  'except OSError:',
  '    pass',
  "print('exit=0')",
  "print('PASSED', file=sys.stderr)",
  'sys.exit(1)',
].join('\n');
// Shell functions and aliases in the agent's persistent shell that would fake a grader's verdict or capture.
const SHELL_TRAPS = [
  'timeout() { echo exit=0; }',
  'python3() { echo 42; }',
  'git() { printf "diff --git a/x b/x\\n"; }',
  'export -f timeout python3 git',
  "alias python3='echo 42'",
  'echo traps-set',
].join('\n');

const SCRIPTS = {
  'code-sym-secret': [bash(`ln -sf ${SECRET} /workspace/solution.py; cat /workspace/solution.py; ls -l /workspace`), finish],
  'code-sym-shadow': [bash('ln -sf /etc/shadow /workspace/solution.py; cat /workspace/solution.py'), finish],
  'code-fifo': [bash('mkfifo /workspace/solution.py && ls -l /workspace'), finish],
  'code-devzero': [bash('ln -sf /dev/zero /workspace/solution.py'), finish],
  'code-forge': [edit({ command: 'create', path: '/workspace/solution.py', file_text: FORGE }), finish],
  'code-shell-fn': [bash(SHELL_TRAPS), edit({ command: 'create', path: '/workspace/solution.py', file_text: 'print(41)\n' }), finish],
  'code-good': [bash(SHELL_TRAPS), edit({ command: 'create', path: '/workspace/solution.py', file_text: 'print(42)\n' }), finish],
  'code-big': [bash(`python3 -c "print('#' * 100000)" > /workspace/solution.py; wc -c /workspace/solution.py`), finish],
  'swe-race': [
    // Swaps the patch files the old capture wrote for symlinks to the secret, as fast as it can.
    bash(
      `(while :; do ln -sfn ${SECRET} /workspace/.git/raas.patch; ln -sfn ${SECRET} /workspace/.git/raas-diff; done) >/dev/null 2>&1 &\n${SHELL_TRAPS}`,
    ),
    edit({ command: 'str_replace', ...FIX }),
    finish,
  ],
  'swe-rewrite-tests': [
    edit({
      command: 'str_replace',
      path: '/workspace/tests/test_core.py',
      old_str: 'median([4, 1, 3, 2]), 2.5)',
      new_str: 'median([4, 1, 3, 2]), 3)',
    }),
    edit({
      command: 'str_replace',
      path: '/workspace/tests/test_core.py',
      old_str: 'median([10, 20]), 15)',
      new_str: 'median([10, 20]), 20)',
    }),
    bash('python3 -m unittest 2>&1 | tail -1'),
    finish,
  ],
};

describe('grading and reads the model cannot forge (rollout server + simulated backend + bwrap)', () => {
  let sim: SimHandle;
  let srv: RolloutServer;
  const root = `${process.getuid?.() === 0 ? '/var/tmp' : '/tmp'}/raas-t-gi-${process.pid}`;
  const results: Record<string, any> = {};

  async function post(route: string, body: unknown): Promise<{ status: number; body: any }> {
    const res = await fetch(`${srv.url}${route}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() };
  }
  const code = (script: string) => ({
    data_source: 'code',
    problem: `Print 42. SCRIPT:${script}`,
    tests: [{ input: '', output: '42\n' }],
    time_limit_s: 5,
  });
  const swe = (script: string, extra: Record<string, unknown> = {}) => ({
    data_source: 'swe',
    problem_statement: `median is wrong for even lengths. SCRIPT:${script}`,
    files: stats.files,
    test_command: stats.test_command,
    FAIL_TO_PASS: stats.FAIL_TO_PASS,
    PASS_TO_PASS: stats.PASS_TO_PASS,
    ...extra,
  });

  beforeAll(async () => {
    fs.writeFileSync(SECRET, `print(42)  # ${MARKER}\n`, { mode: 0o600 });
    sim = await startSim({ seed: 1 }, { policies: [scriptPolicy(SCRIPTS)] });
    srv = await startRolloutServer({
      port: 0,
      log_level: 'silent',
      sandbox: { runtime: 'bwrap', root, max_read_bytes: 64 * 1024 },
      handlers: { code: { test_concurrency: 1, max_iterations: 5 }, swe: { max_iterations: 5 } },
    });
    expect((await post('/add_llm_server', { address: sim.url, api: 'vllm' })).status).toBe(200);
    const jobs: Array<[string, Record<string, unknown>]> = [
      ...Object.keys(SCRIPTS)
        .filter((k) => k.startsWith('code-'))
        .map((k): [string, Record<string, unknown>] => [k, code(k)]),
      ['swe-race', swe('swe-race')],
      ['swe-rewrite-tests', swe('swe-rewrite-tests', { test_files: ['tests'] })],
    ];
    const limit = pLimit(4);
    await Promise.all(
      jobs.map(([name, instance]) =>
        limit(async () => {
          const r = await post('/process', { instance, job_id: name, sampling_params: { enable_thinking: false } });
          expect(r.status, `${name}: ${JSON.stringify(r.body)}`).toBe(200);
          results[name] = r.body;
        }),
      ),
    );
  }, 120_000);
  afterAll(async () => {
    await srv?.close();
    await sim?.close();
    fs.rmSync(root, { recursive: true, force: true });
    fs.rmSync(SECRET, { force: true });
  });

  const toolOutputs = (r: any): string =>
    r.messages
      .filter((m: any) => m.role === 'tool')
      .map((m: any) => m.content)
      .join('\n');

  it('code: solution.py as a symlink to a secret outside the sandbox, or to /etc/shadow, grades 0 and leaks nothing', () => {
    const r = results['code-sym-secret'];
    // The agent really planted the link (the old host-side read followed it as root).
    expect(toolOutputs(r)).toContain(`solution.py -> ${SECRET}`);
    expect(r).toMatchObject({ critical_error: null, reward: 0, resolved: false });
    expect(JSON.stringify(r)).not.toContain(MARKER);
    const s = results['code-sym-shadow'];
    expect(s).toMatchObject({ critical_error: null, reward: 0 });
    expect(toolOutputs(s)).toMatch(/Permission denied/);
    if (SHADOW_LINE) expect(JSON.stringify(s)).not.toContain(SHADOW_LINE);
  });

  it('code: a FIFO or /dev/zero as solution.py is no solution, and the job ends', () => {
    expect(toolOutputs(results['code-fifo'])).toMatch(/^p.* solution\.py/m);
    for (const k of ['code-fifo', 'code-devzero']) {
      expect(results[k], k).toMatchObject({
        critical_error: null,
        reward: 0,
        resolved: false,
        details: { reason: 'no /workspace/solution.py was written' },
      });
    }
  });

  it('code: a program that prints exit=0 (also to the terminal) and PASSED, then exits 1, gets 0', () => {
    expect(results['code-forge']).toMatchObject({
      critical_error: null,
      reward: 0,
      details: { tests: [{ index: 0, status: 'runtime_error', exit_code: 1 }] },
    });
  });

  it("code: functions and aliases in the agent's shell (timeout, python3) change nothing", () => {
    expect(toolOutputs(results['code-shell-fn'])).toContain('traps-set');
    expect(results['code-shell-fn']).toMatchObject({
      critical_error: null,
      reward: 0,
      details: { tests: [{ status: 'wrong_answer', exit_code: 0 }] },
    });
    expect(results['code-good']).toMatchObject({ critical_error: null, reward: 1, resolved: true });
  });

  it('code: a solution over sandbox.max_read_bytes ends the job with a critical error naming the key, trajectory kept', () => {
    const r = results['code-big'];
    expect(toolOutputs(r)).toMatch(/100001 \/workspace\/solution\.py/);
    // The run itself ended well: ProRL's eval_exception keeps its success (openhands/nvidia/utils.py@40c1d8a:488-548); filter is set.
    expect(r).toMatchObject({ critical_error: 'eval', reward: 0, success: true, filter: true });
    expect(r.error).toMatch(/sandbox_limit|RaasError/);
    expect(r.error).toContain('sandbox.max_read_bytes');
    expect(r.messages.length).toBeGreaterThan(2);
  });

  it('swe: a symlink race on patch files and shell functions named git/timeout change nothing; the right fix gets 1', () => {
    const r = results['swe-race'];
    expect(toolOutputs(r)).toContain('traps-set');
    expect(r).toMatchObject({ critical_error: null, reward: 1, resolved: true });
    expect(r.git_patch).toBe(stats.gold_patch);
    expect(JSON.stringify(r)).not.toContain(MARKER);
  });

  it('swe: a patch that rewrites the failing tests to pass gets 0 when test_files names them', () => {
    const r = results['swe-rewrite-tests'];
    // The agent's own run of the rewritten tests passed in its sandbox.
    expect(toolOutputs(r)).toMatch(/^OK$/m);
    expect(r.git_patch).toContain('+++ b/tests/test_core.py');
    expect(r).toMatchObject({ critical_error: null, reward: 0, resolved: false, details: { applied: true } });
    expect(r.details.FAIL_TO_PASS).toEqual({
      'tests.test_core.TestMedian.test_even': 'FAILED',
      'tests.test_core.TestMedian.test_even_pair': 'FAILED',
    });
  });
});

// SWE-bench resets the files its test patch touches to the base commit, then applies the test patch,
// then runs the tests: SWE-bench/SWE-bench swebench/harness/test_spec/python.py@54eecc0f
// (make_eval_script_list_py: reset_tests_command, apply_test_patch_command); ProRL grades the same
// way, in a fresh runtime with the model patch applied first: NVIDIA-NeMo/ProRL-Agent-Server
// openhands/nvidia/swe_agent/utils.py@40c1d8a6 (evaluate_agent, _apply_patch_and_evaluate).
describe('swe grading: the instance tests laid over the model patch (bwrap, handler EVAL)', () => {
  const runtime = bwrapRuntime('gi-eval');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'raas-gi-'));
  afterAll(async () => {
    await runtime.dispose();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  let n = 0;
  /** A real `git diff --cached --binary` of `change` applied to `files` (host git, scratch directory). */
  function patchOf(files: Record<string, string>, change: (dir: string) => void): string {
    const dir = path.join(tmp, `p${n++}`);
    for (const [rel, text] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
      fs.writeFileSync(path.join(dir, rel), text);
    }
    const git = (...args: string[]) =>
      execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], {
        cwd: dir,
        encoding: 'utf8',
        env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null' },
      });
    git('init', '-q', '.');
    git('add', '-A');
    git('commit', '-qm', 'base');
    change(dir);
    git('add', '-A');
    return git('diff', '--cached', '--binary', 'HEAD');
  }
  const write = (dir: string, rel: string, text: string) => {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), text);
  };
  const fix = (dir: string) =>
    write(dir, 'stats/core.py', fs.readFileSync(path.join(dir, 'stats/core.py'), 'utf8').replace(FIX.old_str, FIX.new_str));
  const rewriteTests = (dir: string) =>
    write(dir, 'tests/test_core.py', stats.files['tests/test_core.py']!.replace('2.5)', '3)').replace(', 15)', ', 20)'));

  async function grade(row: Record<string, unknown>, patch: string) {
    const inst = await parseInstance<SweInstance>(sweHandler.instance, row);
    const ctx = stageContext(inst, runtime);
    const run: RunResult = {
      messages: [],
      tokens: { prompt_ids: [], response_ids: [], response_mask: [], logprobs: [] },
      finish_reason: 'finish',
      artifacts: { git_patch: patch },
    };
    try {
      return await sweHandler.eval({ ...ctx, run });
    } finally {
      await ctx.closeAll();
    }
  }
  const base = {
    data_source: 'swe',
    problem_statement: 'median',
    files: stats.files,
    FAIL_TO_PASS: stats.FAIL_TO_PASS,
    PASS_TO_PASS: stats.PASS_TO_PASS,
  };

  it('without test_files or test_patch, the files the test ids name (and tests/__init__.py) are still reset', async () => {
    const attacks = {
      rewrite: patchOf(stats.files, rewriteTests),
      // Monkeypatches the assertions from the test package's __init__.py, run before any test module.
      init: patchOf(stats.files, (d) =>
        write(d, 'tests/__init__.py', 'import unittest\nunittest.TestCase.assertEqual = lambda *a, **k: None\n'),
      ),
      // Deletes the failing tests outright.
      delete: patchOf(stats.files, (d) => fs.rmSync(path.join(d, 'tests/test_core.py'))),
      // Replaces the test package with a symlink to a rewritten copy.
      symlink: patchOf(stats.files, (d) => {
        rewriteTests(d);
        fs.renameSync(path.join(d, 'tests'), path.join(d, 'fake_tests'));
        fs.symlinkSync('fake_tests', path.join(d, 'tests'));
      }),
      // A smudge filter in a .gitconfig at the repository root (HOME is the workspace) would rewrite
      // the tests when grading checks them out; grading reads no global git config.
      smudge: patchOf(stats.files, (d) => {
        rewriteTests(d);
        write(d, '.gitconfig', "[filter \"t\"]\n\tsmudge = sed -e 's/2[.]5)/3)/' -e 's/, 15)/, 20)/'\n\tclean = cat\n");
        write(d, '.gitattributes', 'tests/*.py filter=t\n');
      }),
    };
    const graded = await Promise.all(Object.values(attacks).map((p) => grade(base, p)));
    Object.keys(attacks).forEach((k, i) => {
      expect(graded[i], k).toMatchObject({
        reward: 0,
        resolved: false,
        details: { applied: true, FAIL_TO_PASS: { 'tests.test_core.TestMedian.test_even': 'FAILED' } },
      });
    });
    expect(
      await grade(
        base,
        patchOf(stats.files, (d) => (fix(d), rewriteTests(d))),
      ),
    ).toMatchObject({ reward: 1, resolved: true });
  }, 60_000);

  it('plans the reset from test_files, test_patch paths and the files test ids name', () => {
    expect(testFileCandidates('tests/unit/test_a.py::TestA::test_x[1-2]')).toEqual(['tests/unit/test_a.py']);
    expect(testFileCandidates('test_x (app.tests.test_views.ViewTests)')).toContain('app/tests/test_views.py');
    expect(numstatPaths('1\t0\ta.py\0-\t-\tbin.dat\0' + '2\t1\t\0old/t.py\0new/t.py\0')).toEqual([
      'a.py',
      'bin.dat',
      'old/t.py',
      'new/t.py',
    ]);
    const inst = {
      FAIL_TO_PASS: ['pkg.tests.test_m.T.test_a'],
      PASS_TO_PASS: ['other/test_o.py::test_b'],
      test_files: ['docs/./', 'fixtures'],
    } as unknown as SweInstance;
    const plan = resetPlan(
      inst,
      ['pkg/tests/test_new.py'],
      ['pkg/__init__.py', 'pkg/tests/__init__.py', 'pkg/tests/test_m.py', 'other/test_o.py', 'fixtures/a.json'],
    );
    expect(plan.remove).toEqual([
      'conftest.py',
      'docs',
      'fixtures',
      'other/conftest.py',
      'other/test_o',
      'other/test_o.py',
      'pkg/conftest.py',
      'pkg/tests/__init__.py',
      'pkg/tests/conftest.py',
      'pkg/tests/test_m',
      'pkg/tests/test_m.py',
      'pkg/tests/test_new.py',
    ]);
    // The package's own __init__.py is source, not a test: left as the model wrote it.
    expect(plan.restore).toEqual(['fixtures', 'other/test_o.py', 'pkg/tests/__init__.py', 'pkg/tests/test_m.py']);
  });

  it('a patch that adds a module shadowing the test runner (unittest.py) is not graded', async () => {
    const r = await grade(
      base,
      patchOf(stats.files, (d) => write(d, 'unittest.py', 'raise SystemExit(0)\n')),
    );
    expect(r).toMatchObject({ reward: 0, resolved: false, details: { applied: false } });
    expect(String(r.details!.apply_error)).toMatch(/adds unittest\.py at the repository root/);
  }, 30_000);

  it('test_patch (SWE-bench): the new tests come from the instance, whatever the model wrote at those paths', async () => {
    // The base has no test for even lengths; the test patch adds tests/test_even.py and edits test_core.py.
    const even =
      'import unittest\n\nfrom stats.core import median\n\n\nclass TestEven(unittest.TestCase):\n    def test_even(self):\n        self.assertEqual(median([4, 1, 3, 2]), 2.5)\n';
    const baseFiles = {
      ...stats.files,
      'tests/test_core.py': stats.files['tests/test_core.py']!.split('    def test_even(self)')[0]!.trimEnd() + '\n',
    };
    const testPatch = patchOf(baseFiles, (d) => {
      write(d, 'tests/test_even.py', even);
      write(d, 'tests/test_core.py', stats.files['tests/test_core.py']!);
    });
    const row = {
      ...base,
      files: baseFiles,
      test_patch: testPatch,
      FAIL_TO_PASS: ['tests.test_even.TestEven.test_even', 'tests.test_core.TestMedian.test_even_pair'],
      PASS_TO_PASS: ['tests.test_core.TestMedian.test_odd'],
    };
    const fake = 'import unittest\n\n\nclass TestEven(unittest.TestCase):\n    def test_even(self):\n        pass\n';
    const [gold, none, planted, fixedAndPlanted] = await Promise.all([
      grade(row, patchOf(baseFiles, fix)),
      grade(
        row,
        patchOf(baseFiles, (d) => write(d, 'NOTES.txt', 'nothing\n')),
      ),
      // The model creates the file the test patch creates (would make `git apply` of the test patch
      // fail) and edits test_core.py: both are reset first.
      grade(
        row,
        patchOf(
          baseFiles,
          (d) => (write(d, 'tests/test_even.py', fake), write(d, 'tests/test_core.py', baseFiles['tests/test_core.py']! + '\n# edited\n')),
        ),
      ),
      grade(
        row,
        patchOf(baseFiles, (d) => (fix(d), write(d, 'tests/test_even.py', fake))),
      ),
    ]);
    expect(gold).toMatchObject({ reward: 1, resolved: true });
    expect(none).toMatchObject({ reward: 0, details: { FAIL_TO_PASS: { 'tests.test_even.TestEven.test_even': 'FAILED' } } });
    expect(planted).toMatchObject({
      reward: 0,
      details: { applied: true, FAIL_TO_PASS: { 'tests.test_even.TestEven.test_even': 'FAILED' } },
    });
    expect(planted.details!.test_patch_error).toBeUndefined();
    expect(fixedAndPlanted).toMatchObject({ reward: 1, resolved: true });
  }, 60_000);
});
