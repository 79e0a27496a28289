import { RaasError } from '../../../protocol/errors.js';
import type { SweHandlerConfig, SweInstance } from '../../../protocol/tasks.js';
import type { Sandbox } from '../../sandbox/types.js';
import type { StageContext } from '../types.js';
import { SHADOW_CHECK, numstatPaths, resetPlan } from './protect.js';
import { git, script } from './git.js';
import { initRepo, repoMaterial, repoSpec } from './repo.js';
import { testRunner, type TestRunner } from './testcmd.js';

/** Per-test outcome of an evaluation. */
export interface SweEvalDetails extends Record<string, unknown> {
  applied: boolean;
  apply_error?: string;
  test_patch_error?: string;
  FAIL_TO_PASS: Record<string, 'PASSED' | 'FAILED'>;
  PASS_TO_PASS: Record<string, 'PASSED' | 'FAILED'>;
}

/** The patches arrive as workspace files (any size), then move to PATCH_DIR, outside the repository. */
const MODEL_PATCH = '.raas-model.patch';
const TEST_PATCH = '.raas-test.patch';
const PATCH_DIR = '/tmp/raas';
const inSandbox = (file: string): string => `${PATCH_DIR}/${file.slice('.raas-'.length)}`;

/**
 * Environment of the test processes: HOME outside the repository (a patch could otherwise add a
 * user site-packages or dotfiles under it), no user site directory, and bytecode cached outside
 * the repository (a `__pycache__` in a patch, e.g. an unchecked hash-based .pyc of a test module,
 * is never read).
 */
const TEST_ENV = { HOME: '/tmp', PYTHONNOUSERSITE: '1', PYTHONDONTWRITEBYTECODE: '1', PYTHONPYCACHEPREFIX: '/tmp/raas-pycache' };

/**
 * Grades `patch` the way SWE-bench does, in a fresh sandbox the agent never touched: the base
 * commit, the model's patch applied with `git apply`, then the instance's tests laid over it (the
 * test files reset to the base commit, `test_patch` applied), then the listed tests run by a
 * fresh `bash --noprofile --norc`, each verdict the exit status of that process. All tests run
 * together first; only when that fails does each run alone, to say which failed.
 */
export async function evaluatePatch(ctx: StageContext<SweInstance>, patch: string, opts: { testTimeoutS: number }): Promise<{ resolved: boolean; details: SweEvalDetails }> {
  const inst = ctx.job.instance;
  const signal = ctx.signal;
  const details: SweEvalDetails = { applied: false, FAIL_TO_PASS: {}, PASS_TO_PASS: {} };
  const all = [...inst.FAIL_TO_PASS, ...inst.PASS_TO_PASS];
  const mark = (status: 'PASSED' | 'FAILED', only?: string) => {
    for (const t of inst.FAIL_TO_PASS) if (!only || only === t) details.FAIL_TO_PASS[t] = status;
    for (const t of inst.PASS_TO_PASS) if (!only || only === t) details.PASS_TO_PASS[t] = status;
  };
  const fail = (key: 'apply_error' | 'test_patch_error', text: string) => {
    details[key] = text.trim().slice(0, 2000);
    mark('FAILED');
    return { resolved: false, details };
  };
  if (patch.trim() === '') return fail('apply_error', 'empty patch: the model changed nothing');

  const hasTestPatch = !!inst.test_patch?.trim();
  const patches: Record<string, string> = { [MODEL_PATCH]: withNewline(patch), ...(hasTestPatch ? { [TEST_PATCH]: withNewline(inst.test_patch!) } : {}) };
  const material = await repoMaterial(ctx);
  const sb = await ctx.sandboxes.open(repoSpec(material, { tools: [] }, patches), signal);
  try {
    await initRepo(sb, material, signal);
    // Out of the worktree before the model's patch applies: a patch cannot reach /tmp.
    const moved = await script(sb, `set -e; mkdir -p ${PATCH_DIR}; for f in "$@"; do mv -- ".raas-$f" "${PATCH_DIR}/$f"; done`, Object.keys(patches).map((f) => f.slice('.raas-'.length)), { signal });
    if (moved.exit_code !== 0) throw new RaasError('sandbox_error', `swe: could not stage the patches: ${moved.stderr.slice(-2000)}`);
    const applied = await git(sb, ['apply', '--whitespace=nowarn', inSandbox(MODEL_PATCH)], { timeout_s: 60, signal });
    if (applied.exit_code !== 0) return fail('apply_error', applied.stderr || applied.stdout || `git apply exited with ${applied.exit_code ?? applied.signal}`);
    details.applied = true;

    const tree = await git(sb, ['ls-tree', '-r', '-z', '--name-only', 'HEAD'], { timeout_s: 60, maxOutputBytes: 64 << 20, signal });
    if (tree.exit_code !== 0 || tree.truncated) throw new RaasError('sandbox_error', `swe: could not list the base commit: ${tree.stderr.slice(-2000)}`);
    const baseFiles = tree.stdout.split('\0').filter(Boolean);

    const shadow = await shadowedModules(sb, baseFiles, signal);
    if (shadow.length) {
      details.applied = false;
      return fail('apply_error', `the patch adds ${shadow.join(', ')} at the repository root, shadowing the standard library the test runner imports; not graded`);
    }

    let testPatchPaths: string[] = [];
    if (hasTestPatch) {
      const stat = await git(sb, ['apply', '--numstat', '-z', inSandbox(TEST_PATCH)], { timeout_s: 60, signal });
      if (stat.exit_code !== 0) return fail('test_patch_error', `instance.test_patch is not a patch git can read: ${stat.stderr}`);
      testPatchPaths = numstatPaths(stat.stdout);
    }
    const modelStat = await git(sb, ['apply', '--numstat', '-z', inSandbox(MODEL_PATCH)], { timeout_s: 60, signal });
    if (modelStat.exit_code !== 0) throw new RaasError('sandbox_error', `swe: could not list the paths of the model's patch: ${modelStat.stderr.slice(-2000)}`);
    const resetError = await resetTests(sb, resetPlan(inst, testPatchPaths, baseFiles, numstatPaths(modelStat.stdout)), signal);
    if (resetError) {
      details.applied = false;
      return fail('apply_error', `the patch leaves the test files in a state grading cannot reset to the base commit: ${resetError}`);
    }
    if (hasTestPatch) {
      const tp = await git(sb, ['apply', '--whitespace=nowarn', inSandbox(TEST_PATCH)], { timeout_s: 60, signal });
      if (tp.exit_code !== 0) {
        ctx.log.warn({ job_id: ctx.job.id, err: tp.stderr.slice(-500) }, 'swe: instance.test_patch did not apply after the model patch');
        return fail('test_patch_error', `instance.test_patch did not apply after the model's patch: ${tp.stderr || tp.stdout}`);
      }
    }

    const runner = testRunner(inst, ctx.config as SweHandlerConfig);
    if (await passes(sb, runner, all, opts.testTimeoutS, signal)) {
      mark('PASSED');
      return { resolved: true, details };
    }
    for (const t of all) mark((await passes(sb, runner, [t], opts.testTimeoutS, signal)) ? 'PASSED' : 'FAILED', t);
    const resolved = Object.values(details.FAIL_TO_PASS).every((s) => s === 'PASSED') && Object.values(details.PASS_TO_PASS).every((s) => s === 'PASSED');
    return { resolved, details };
  } finally {
    await sb.close();
  }
}

function withNewline(patch: string): string {
  return patch.endsWith('\n') ? patch : `${patch}\n`;
}

/** Removes the planned paths, then checks out those the base commit has; answers what failed, if anything. */
async function resetTests(sb: Sandbox, plan: { remove: string[]; restore: string[] }, signal: AbortSignal): Promise<string | undefined> {
  for (let i = 0; i < plan.remove.length; i += 500) {
    const r = await sb.exec(['rm', '-rf', '--', ...plan.remove.slice(i, i + 500)], { timeout_s: 120, signal });
    if (r.exit_code !== 0) return r.stderr.trim().slice(-1000) || `rm exited with ${r.exit_code ?? r.signal}`;
  }
  for (let i = 0; i < plan.restore.length; i += 500) {
    const r = await git(sb, ['checkout', '-q', 'HEAD', '--', ...plan.restore.slice(i, i + 500)], { timeout_s: 120, signal });
    if (r.exit_code !== 0) return r.stderr.trim().slice(-1000) || `git checkout exited with ${r.exit_code ?? r.signal}`;
  }
  return undefined;
}

/** Root entries the patch added that shadow a standard-library module (none when python3 is missing). */
async function shadowedModules(sb: Sandbox, baseFiles: readonly string[], signal: AbortSignal): Promise<string[]> {
  const roots = [...new Set(baseFiles.map((f) => f.split('/')[0]!))];
  const r = await sb.exec(['python3', '-I', '-c', SHADOW_CHECK], { stdin: roots.join('\n'), timeout_s: 60, env: TEST_ENV, signal });
  if (r.exit_code !== 0) return [];
  return r.stdout.split('\n').filter(Boolean);
}

/** Runs the test command on `ids` in a fresh shell; passed means exit status 0 from that process. */
async function passes(sb: Sandbox, runner: TestRunner, ids: string[], timeoutS: number, signal: AbortSignal): Promise<boolean> {
  // The command is shell text (SWE-bench's start with assignments: `PYTHONWARNINGS=… bin/test`); the ids are its arguments.
  const r = await sb.exec(['timeout', '-k', '5', String(timeoutS), 'bash', '--noprofile', '--norc', '-c', `${runner.command} "$@"`, 'raas', ...runner.args(ids)], {
    timeout_s: timeoutS + 15,
    env: TEST_ENV,
    maxOutputBytes: 1 << 20,
    signal,
  });
  return !r.timed_out && r.exit_code === 0;
}
