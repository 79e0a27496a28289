import { RaasError } from '../../../protocol/errors.js';
import type { SweHandlerConfig, SweInstance } from '../../../protocol/tasks.js';
import type { Sandbox } from '../../sandbox/types.js';
import type { StageContext } from '../types.js';
import { firstFilter, type FilterReason } from '../common/filter.js';
import { SHADOW_CHECK, numstatPaths, resetPlan } from './protect.js';
import { git, script } from './git.js';
import { initRepo, repoMaterial, repoSpec } from './repo.js';
import { imageSpec, initImageRepo, instanceImage } from './image.js';
import { gradingPlan } from './plan.js';
import { TEST_ENV, gradeByExitStatus, gradeByLog, type SweEvalDetails, type SweEvalOutcome } from './run-tests.js';

export type { SweEvalOutcome } from './run-tests.js';

/** The patches arrive as workspace files (any size), then move to PATCH_DIR, outside the repository. */
const MODEL_PATCH = '.raas-model.patch';
const TEST_PATCH = '.raas-test.patch';
const PATCH_DIR = '/tmp/raas';
const inSandbox = (file: string): string => `${PATCH_DIR}/${file.slice('.raas-'.length)}`;

/**
 * Grades `patch` the way SWE-bench does, in a fresh sandbox the agent never touched: the base
 * commit, the model's patch applied (`git apply`, else `patch --fuzz=5`, SWE-bench's
 * GIT_APPLY_CMDS, run_evaluation.py@726c546:64-68), then the eval script's steps
 * (test_spec/python.py@726c546:405-453): the test files reset to the base commit, `test_patch`
 * applied, the test command run once. Its log is read by the repository's parser and resolved as
 * get_eval_report resolves it; tamper canaries run beside the tests. An instance whose command has
 * no parser is graded by exit status instead.
 */
export async function evaluatePatch(
  ctx: StageContext<SweInstance>,
  patch: string,
  opts: { testTimeoutS: number },
): Promise<SweEvalOutcome> {
  const inst = ctx.job.instance;
  const cfg = ctx.config as SweHandlerConfig;
  const signal = ctx.signal;
  const plan = gradingPlan(inst, cfg);
  const details: SweEvalDetails = {
    applied: false,
    grading: plan.mode,
    ...(plan.parser ? { log_parser: plan.parser } : {}),
    test_command: plan.command,
    FAIL_TO_PASS: {},
    PASS_TO_PASS: {},
  };
  const mark = (status: string): void => {
    for (const t of inst.FAIL_TO_PASS) details.FAIL_TO_PASS[t] = status;
    for (const t of inst.PASS_TO_PASS) details.PASS_TO_PASS[t] = status;
  };
  const fail = (key: 'apply_error' | 'test_patch_error', text: string, reason?: FilterReason): SweEvalOutcome => {
    details[key] = text.trim().slice(0, 2000);
    mark('FAILED');
    const filter = firstFilter(ctx.config, reason);
    return { resolved: false, details, ...(filter ? { filter_reason: filter } : {}) };
  };
  // An empty patch is the model's answer (it changed nothing), graded 0 and trained on.
  if (patch.trim() === '') return fail('apply_error', 'empty patch: the model changed nothing');

  const hasTestPatch = !!inst.test_patch?.trim();
  const patches: Record<string, string> = {
    [MODEL_PATCH]: withNewline(patch),
    ...(hasTestPatch ? { [TEST_PATCH]: withNewline(inst.test_patch!) } : {}),
  };
  // The instance's own image when it has one (its /testbed and environment), else a fresh copy of the repository.
  const image = instanceImage(inst, cfg);
  const material = image ? undefined : await repoMaterial(ctx);
  const sb = await ctx.sandboxes.open(
    image ? imageSpec(image, { tools: [], files: patches }) : repoSpec(material!, { tools: [] }, patches),
    signal,
  );
  try {
    if (image) await initImageRepo(sb, inst.base_commit, false, signal);
    else await initRepo(sb, material!, signal);
    // Out of the worktree before the model's patch applies: a patch cannot reach /tmp.
    const moved = await script(
      sb,
      `set -e; mkdir -p ${PATCH_DIR}; for f in "$@"; do mv -- ".raas-$f" "${PATCH_DIR}/$f"; done`,
      Object.keys(patches).map((f) => f.slice('.raas-'.length)),
      { signal },
    );
    if (moved.exit_code !== 0) throw new RaasError('sandbox_error', `swe: could not stage the patches: ${moved.stderr.slice(-2000)}`);
    const applyError = await applyModelPatch(sb, inSandbox(MODEL_PATCH), signal);
    if (applyError !== undefined) return fail('apply_error', applyError, 'patch_apply_failed');
    details.applied = true;

    const tree = await git(sb, ['ls-tree', '-r', '-z', '--name-only', 'HEAD'], { timeout_s: 60, maxOutputBytes: 64 << 20, signal });
    if (tree.exit_code !== 0 || tree.truncated)
      throw new RaasError('sandbox_error', `swe: could not list the base commit: ${tree.stderr.slice(-2000)}`);
    const baseFiles = tree.stdout.split('\0').filter(Boolean);

    const shadow = await shadowedModules(sb, baseFiles, signal);
    if (shadow.length) {
      details.applied = false;
      return fail(
        'apply_error',
        `the patch adds ${shadow.join(', ')} at the repository root, shadowing the standard library the test runner imports; not graded`,
      );
    }

    let testPatchPaths: string[] = [];
    if (hasTestPatch) {
      const stat = await git(sb, ['apply', '--numstat', '-z', inSandbox(TEST_PATCH)], { timeout_s: 60, signal });
      if (stat.exit_code !== 0)
        return fail('test_patch_error', `instance.test_patch is not a patch git can read: ${stat.stderr}`, 'patch_apply_failed');
      testPatchPaths = numstatPaths(stat.stdout);
    }
    const modelStat = await git(sb, ['apply', '--numstat', '-z', inSandbox(MODEL_PATCH)], { timeout_s: 60, signal });
    const modelPaths = modelStat.exit_code === 0 ? numstatPaths(modelStat.stdout) : [];
    const resetError = await resetTests(sb, resetPlan(inst, testPatchPaths, baseFiles, modelPaths), signal);
    if (resetError) {
      details.applied = false;
      return fail('apply_error', `the patch leaves the test files in a state grading cannot reset to the base commit: ${resetError}`);
    }
    if (hasTestPatch) {
      const tp = await git(sb, ['apply', '--whitespace=nowarn', inSandbox(TEST_PATCH)], { timeout_s: 60, signal });
      if (tp.exit_code !== 0) {
        ctx.log.warn({ job_id: ctx.job.id, err: tp.stderr.slice(-500) }, 'swe: instance.test_patch did not apply after the model patch');
        return fail(
          'test_patch_error',
          `instance.test_patch did not apply after the model's patch: ${tp.stderr || tp.stdout}`,
          'patch_apply_failed',
        );
      }
    }
    const grade = plan.mode === 'log' ? gradeByLog : gradeByExitStatus;
    return await grade({ ctx, sb, plan, details, baseFiles, testPatchPaths, timeoutS: opts.testTimeoutS });
  } finally {
    await sb.close();
  }
}

function withNewline(patch: string): string {
  return patch.endsWith('\n') ? patch : `${patch}\n`;
}

/** `git apply`, else `patch --batch --fuzz=5 -p1` (SWE-bench's fallback); answers what failed, if anything. */
async function applyModelPatch(sb: Sandbox, file: string, signal: AbortSignal): Promise<string | undefined> {
  const applied = await git(sb, ['apply', '--whitespace=nowarn', file], { timeout_s: 60, signal });
  if (applied.exit_code === 0) return undefined;
  const fuzzy = await sb.exec(['patch', '--batch', '--fuzz=5', '-p1', '--no-backup-if-mismatch', '-i', file], { timeout_s: 60, signal });
  if (fuzzy.exit_code === 0) return undefined;
  // Grading ends here: whatever `patch` half-applied goes with the sandbox.
  return applied.stderr || applied.stdout || `git apply exited with ${applied.exit_code ?? applied.signal}`;
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
