import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { RaasError } from '../../../protocol/errors.js';
import type { SweHandlerConfig, SweInstance } from '../../../protocol/tasks.js';
import type { Sandbox } from '../../sandbox/types.js';
import type { StageContext } from '../types.js';
import { firstFilter, oomKills, type FilterReason } from '../common/filter.js';
import { canaryKind, checkCanary, makeCanary, type Canary, type CanaryAnchor, type CanaryVerdict } from './canary.js';
import { script } from './git.js';
import { cleanR2eOutput, parseLog, r2eMatches, type StatusMap } from './parsers/index.js';
import type { GradingPlan } from './plan.js';
import { testFileCandidates } from './protect.js';
import { evalReport, testPassed } from './report.js';

/** Per-test outcome of an evaluation (see docs/tasks.md, "How swe grades"). */
export interface SweEvalDetails extends Record<string, unknown> {
  applied: boolean;
  apply_error?: string;
  test_patch_error?: string;
  /** Each test's status in the log (PASSED, FAILED, SKIPPED, ERROR, XFAIL); a test the log lacks is FAILED and listed in `missing`. */
  FAIL_TO_PASS: Record<string, string>;
  PASS_TO_PASS: Record<string, string>;
}

/** An evaluation: the verdict, its details, and why the reward is unreliable when it is. */
export interface SweEvalOutcome {
  resolved: boolean;
  details: SweEvalDetails;
  filter_reason?: FilterReason;
}

/**
 * Environment of the test processes: HOME outside the repository (a patch could otherwise add a
 * user site-packages or dotfiles under it), no user site directory, no bytecode written. Bytecode
 * the patch brought (a `__pycache__`, e.g. an unchecked hash-based .pyc of a test module) is
 * deleted from the repository before the run (dropPycache); the interpreter's own precompiled
 * standard library stays usable, which a PYTHONPYCACHEPREFIX would forgo (every module compiled
 * again, about a third of a small suite's run).
 */
export const TEST_ENV = { HOME: '/tmp', PYTHONNOUSERSITE: '1', PYTHONDONTWRITEBYTECODE: '1' };

/** Removes every `__pycache__` directory of the repository (a patch can add them; git tracks them when it does). */
async function dropPycache(sb: Sandbox, signal: AbortSignal): Promise<void> {
  const r = await sb.exec(
    ['find', '.', '-path', './.git', '-prune', '-o', '-name', '__pycache__', '-type', 'd', '-prune', '-exec', 'rm', '-rf', '--', '{}', '+'],
    { timeout_s: 120, signal },
  );
  if (r.exit_code !== 0)
    throw new RaasError('sandbox_error', `swe: could not remove the repository's __pycache__ directories: ${r.stderr.slice(-1000)}`);
}

/** Default bound of one test log (handlers.swe.max_log_bytes): every parser reads it in one pass. */
const MAX_LOG_BYTES = 16 << 20;

/** What a grading step gets: the stage, the prepared sandbox (patches applied, tests reset), the plan. */
export interface GradeInput {
  ctx: StageContext<SweInstance>;
  sb: Sandbox;
  plan: GradingPlan;
  details: SweEvalDetails;
  baseFiles: readonly string[];
  testPatchPaths: readonly string[];
  timeoutS: number;
}

/** One run of the test command: its log (stdout and stderr as one stream, in order), and how it ended. */
interface TestRun {
  log: string;
  exitCode: number | null;
  timedOut: boolean;
  truncated: boolean;
}

/**
 * Runs the test command once in a fresh `bash --noprofile --norc` (nothing the workspace holds is
 * sourced), under `timeout`. A run counts as timed out only when it was killed at its limit: a
 * process that exits 124 by itself does not fake one.
 */
async function runTests(
  sb: Sandbox,
  plan: GradingPlan,
  args: string[],
  timeoutS: number,
  maxBytes: number,
  signal: AbortSignal,
): Promise<TestRun> {
  await dropPycache(sb, signal);
  const t0 = performance.now();
  const r = await sb.exec(
    ['timeout', '-k', '5', String(timeoutS), 'bash', '--noprofile', '--norc', '-c', `exec 2>&1; ${plan.command} "$@"`, 'raas', ...args],
    {
      timeout_s: timeoutS + 15,
      env: { ...TEST_ENV, ...plan.env },
      maxOutputBytes: maxBytes,
      signal,
    },
  );
  const atLimit = performance.now() - t0 >= timeoutS * 1000 - 50;
  const timedOut = r.timed_out || (atLimit && (r.exit_code === 124 || r.exit_code === 137 || r.signal === 'SIGKILL'));
  return { log: r.stdout, exitCode: r.exit_code, timedOut, truncated: r.truncated };
}

/** The last `n` characters of a log, for the details. */
function tail(log: string, n = 4000): string {
  return log.length <= n ? log : `…${log.slice(-n)}`;
}

/**
 * SWE-bench's grading: the test command once, its log parsed, FAIL_TO_PASS and PASS_TO_PASS
 * resolved as get_eval_report does (an R2E-Gym row: the parsed log compared with its
 * expected_output_json). Canaries ride along; a run whose canaries say the reports were forged,
 * or that lost them while tests passed, is not graded (`grader_tampered`).
 */
export async function gradeByLog(g: GradeInput): Promise<SweEvalOutcome> {
  const { ctx, sb, plan, details } = g;
  const inst = ctx.job.instance;
  const cfg = ctx.config as SweHandlerConfig;
  const signal = ctx.signal;
  if (plan.r2e) {
    // R2E-Gym keeps its tests at /r2e_tests and links them into the repository (ProRL: utils.py@40c1d8a, "ln -s /r2e_tests /testbed/r2e_tests").
    await script(sb, '[ -e r2e_tests ] || [ ! -d /r2e_tests ] || ln -s /r2e_tests r2e_tests', [], { timeout_s: 30, signal });
  }
  let canary: Canary | undefined;
  if (cfg.canaries === false || plan.noCanaries) details.canaries = 'off';
  else {
    canary = makeCanary(canaryKind(plan.parser!), canaryAnchor(g));
    const err = await writeFiles(sb, canary.files, signal);
    if (err) {
      details.canaries = `unavailable: ${err}`;
      canary = undefined;
    }
  }
  const ids = [...inst.FAIL_TO_PASS, ...inst.PASS_TO_PASS];
  const unreliable = (reason: FilterReason | undefined, note: string): SweEvalOutcome => {
    details.error = note;
    for (const t of inst.FAIL_TO_PASS) details.FAIL_TO_PASS[t] = 'FAILED';
    for (const t of inst.PASS_TO_PASS) details.PASS_TO_PASS[t] = 'FAILED';
    const filter = firstFilter(ctx.config, oomKills(sb) > 0 ? 'eval_oom' : undefined, reason);
    return { resolved: false, details, ...(filter ? { filter_reason: filter } : {}) };
  };
  let run: TestRun;
  try {
    run = await runTests(sb, plan, [...plan.args, ...(canary?.args ?? [])], g.timeoutS, cfg.max_log_bytes ?? MAX_LOG_BYTES, signal);
  } catch (err) {
    // The memory limit killed the tool server mid-run: no log, an eval killed for memory.
    if (!signal.aborted && err instanceof RaasError && err.code === 'sandbox_limit' && oomKills(sb) > 0)
      return unreliable(undefined, err.message);
    throw err;
  }
  details.test_exit_code = run.exitCode;
  details.test_log_tail = tail(run.log);
  const oom = oomKills(sb) > 0 ? 'eval_oom' : undefined;
  // SWE-bench: a timed-out run is not graded (TESTS_TIMEOUT, grading.py@726c546:61-73).
  if (run.timedOut) return unreliable('eval_timeout', `the test command ran past handlers.swe.test_timeout_s (${g.timeoutS} s)`);
  if (run.truncated)
    return unreliable(
      'eval_log_truncated',
      `the test log is over handlers.swe.max_log_bytes (${cfg.max_log_bytes ?? MAX_LOG_BYTES} bytes): not graded`,
    );

  const parsed = parseLog(plan.parser!, plan.r2e ? cleanR2eOutput(run.log) : run.log);
  let sm: StatusMap = parsed;
  let verdict: CanaryVerdict | undefined;
  if (canary) {
    ({ verdict, rest: sm } = checkCanary(canary, parsed));
    details.canaries = verdict;
  }
  for (const t of inst.FAIL_TO_PASS) details.FAIL_TO_PASS[t] = sm.get(t) ?? 'FAILED';
  for (const t of inst.PASS_TO_PASS) details.PASS_TO_PASS[t] = sm.get(t) ?? 'FAILED';
  const missing = ids.filter((t) => !sm.has(t));
  if (missing.length) details.missing = missing.slice(0, 1000);

  let resolved: boolean;
  let anyPassed: boolean;
  if (plan.r2e) {
    const cmp = r2eMatches(sm, expectedMap(inst.expected_output_json));
    resolved = cmp.match;
    details.r2e = {
      match: cmp.match,
      mismatched: cmp.mismatched.slice(0, 1000),
      missing: cmp.missing.slice(0, 1000),
      extra: cmp.extra.slice(0, 1000),
    };
    anyPassed = [...sm.values()].some((s) => s === 'PASSED' || s === 'XFAIL');
  } else {
    const report = evalReport(sm, inst.FAIL_TO_PASS, inst.PASS_TO_PASS, inst.repo);
    resolved = report.resolved;
    details.resolution = report.status;
    details.tests_status = report.tests_status;
    anyPassed = ids.some((t) => testPassed(t, sm));
  }
  // Forged reports, or canaries lost while tests passed: the log cannot be trusted. Lost canaries in
  // a run where nothing passed (a patch that breaks collection) are an honest failure, graded 0.
  const tampered = verdict !== undefined && (verdict.forged || (!verdict.expected && (anyPassed || resolved)));
  if (tampered) {
    details.tampered = true;
    resolved = false;
  }
  const filter = firstFilter(ctx.config, oom, tampered ? 'grader_tampered' : undefined);
  return { resolved, details, ...(filter ? { filter_reason: filter } : {}) };
}

/** An R2E-Gym row's expected map; an unreadable or empty one is the instance's error (nothing could be compared). */
function expectedMap(v: SweInstance['expected_output_json']): StatusMap {
  let obj: unknown = v;
  if (typeof v === 'string') {
    try {
      obj = JSON.parse(v);
    } catch (err) {
      throw new RaasError('invalid_instance', `swe: instance.expected_output_json is not JSON: ${(err as Error).message}`, {
        retryable: false,
      });
    }
  }
  const entries =
    obj && typeof obj === 'object' && !Array.isArray(obj)
      ? Object.entries(obj as Record<string, unknown>).filter(([, s]) => typeof s === 'string')
      : [];
  if (!entries.length)
    throw new RaasError('invalid_instance', 'swe: instance.expected_output_json must be a non-empty object of test name → status', {
      retryable: false,
    });
  return new Map(entries as Array<[string, string]>);
}

/**
 * Where the canaries go: beside the instance's first test file (the directory of its first
 * directive or test id), so the same conftest files and packages apply; for Django, in the app of
 * its first label (a new app when that is no directory under tests/); for R2E, in r2e_tests/.
 */
function canaryAnchor(g: GradeInput): CanaryAnchor {
  const known = new Set([...g.baseFiles, ...g.testPatchPaths]);
  const dirs = new Set<string>();
  for (const f of known) for (let i = f.indexOf('/'); i > 0; i = f.indexOf('/', i + 1)) dirs.add(f.slice(0, i));
  const inst = g.ctx.job.instance;
  if (g.plan.parser === 'django') {
    const app = (g.plan.args[0] ?? '').split('.')[0]!;
    return app && /^\w+$/.test(app) && dirs.has(`tests/${app}`) ? { dir: `tests/${app}`, djangoApp: app } : { dir: 'tests' };
  }
  const candidates = [...g.plan.args, ...inst.FAIL_TO_PASS, ...inst.PASS_TO_PASS];
  for (const c of candidates) {
    const node = c.split('::')[0]!;
    const file = node.endsWith('.py') && known.has(node) ? node : testFileCandidates(c).find((p) => known.has(p));
    if (file) return { dir: path.posix.dirname(file) };
  }
  return { dir: '.' };
}

/** Writes new files into the repository; answers what failed (a path that exists, a read-only directory), if anything. */
async function writeFiles(sb: Sandbox, files: Record<string, string>, signal: AbortSignal): Promise<string | undefined> {
  const args = Object.entries(files).flat();
  const r = await script(
    sb,
    'set -e; while [ $# -gt 0 ]; do f=$1; c=$2; shift 2; if [ -e "$f" ] || [ -L "$f" ]; then echo "$f exists" >&2; exit 3; fi; mkdir -p -- "$(dirname -- "$f")"; printf %s "$c" > "$f"; done',
    args,
    { timeout_s: 30, signal },
  );
  return r.exit_code === 0 ? undefined : r.stderr.trim().slice(-500) || `exit ${r.exit_code ?? r.signal}`;
}

/**
 * For a command without a parser: each test decided by the exit status of a fresh process. All
 * tests run together first; only when that fails does each run alone, to say which failed. (Code
 * under test can force its own exit status: give such instances a log_parser.)
 */
export async function gradeByExitStatus(g: GradeInput): Promise<SweEvalOutcome> {
  const { ctx, sb, plan, details } = g;
  const inst = ctx.job.instance;
  const all = [...inst.FAIL_TO_PASS, ...inst.PASS_TO_PASS];
  let timedOut = false;
  const passes = async (ids: string[]): Promise<boolean> => {
    const r = await runTests(sb, plan, ids, g.timeoutS, 1 << 20, ctx.signal);
    timedOut ||= r.timedOut;
    return !r.timedOut && r.exitCode === 0;
  };
  const mark = (status: string, only?: string): void => {
    for (const t of inst.FAIL_TO_PASS) if (!only || only === t) details.FAIL_TO_PASS[t] = status;
    for (const t of inst.PASS_TO_PASS) if (!only || only === t) details.PASS_TO_PASS[t] = status;
  };
  let resolved: boolean;
  try {
    if (await passes(all)) {
      mark('PASSED');
      resolved = true;
    } else {
      for (const t of all) mark((await passes([t])) ? 'PASSED' : 'FAILED', t);
      resolved =
        Object.values(details.FAIL_TO_PASS).every((s) => s === 'PASSED') &&
        Object.values(details.PASS_TO_PASS).every((s) => s === 'PASSED');
    }
  } catch (err) {
    if (ctx.signal.aborted || !(err instanceof RaasError) || err.code !== 'sandbox_limit' || oomKills(sb) === 0) throw err;
    // The memory limit killed the tool server mid-run.
    details.error = err.message;
    for (const t of all) if (!(t in details.FAIL_TO_PASS) && !(t in details.PASS_TO_PASS)) mark('FAILED', t);
    resolved = false;
  }
  const filter = firstFilter(ctx.config, oomKills(sb) > 0 ? 'eval_oom' : undefined, timedOut ? 'eval_timeout' : undefined);
  if (timedOut) resolved = false;
  return { resolved, details, ...(filter ? { filter_reason: filter } : {}) };
}
