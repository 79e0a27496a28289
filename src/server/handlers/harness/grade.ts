import { RaasError } from '../../../protocol/errors.js';
import type { HarnessGrader } from '../../../protocol/harness.js';
import type { CodeInstance, MathInstance, SweInstance } from '../../../protocol/tasks.js';
import type { Sandbox } from '../../sandbox/types.js';
import { runHiddenTests } from '../code/tests.js';
import { configNumber } from '../common/run.js';
import { answersMatch, lastBoxed } from '../math/grade.js';
import { evaluatePatch } from '../swe/evaluate.js';
import { capturePatch } from '../swe/repo.js';
import type { EvalContext, EvalResult, RunContext, StageContext } from '../types.js';

/** Where the code grader reads the program the harness wrote, as the code handler does. */
const SOLUTION_FILE = 'solution.py';

/** A grader's section of handlers.harness (`handlers.harness.swe`, `handlers.harness.code`), or {}. */
function section(config: Record<string, unknown>, grader: string): Record<string, unknown> {
  const s = config[grader];
  return s && typeof s === 'object' && !Array.isArray(s) ? (s as Record<string, unknown>) : {};
}

/**
 * The stage's context under another config section (a grader's): read through, since the
 * pipeline's contexts keep their state in private fields that a spread would not carry.
 */
function withConfig<I>(ctx: StageContext<unknown>, config: Record<string, unknown>): StageContext<I> {
  return {
    get job() {
      return ctx.job as StageContext<I>['job'];
    },
    get signal() {
      return ctx.signal;
    },
    config,
    get log() {
      return ctx.log;
    },
    get sandboxes() {
      return ctx.sandboxes;
    },
    get tokenizer() {
      return ctx.tokenizer;
    },
  };
}

/** What RUN reads out of the sandbox for its grader: the program (code) or the diff (swe), through the sandbox. */
export async function readArtifacts<I>(ctx: RunContext<I>, sb: Sandbox): Promise<Record<string, unknown>> {
  const grader = (ctx.job.instance as { grader?: HarnessGrader }).grader;
  try {
    if (grader === 'code') {
      try {
        return { solution: (await sb.readFile(SOLUTION_FILE, { signal: ctx.signal })).toString('utf8') };
      } catch (err) {
        if (err instanceof RaasError && err.code === 'sandbox_limit') throw err;
        return { solution: null };
      }
    }
    if (grader === 'swe') {
      const base = typeof ctx.init.metadata?.base_commit === 'string' ? ctx.init.metadata.base_commit : 'HEAD';
      return { git_patch: await capturePatch(sb, base, configNumber(section(ctx.config, 'swe'), 'max_patch_bytes', 16 << 20), ctx.signal) };
    }
  } catch (err) {
    if (ctx.signal.aborted) throw err;
    return { artifact_error: err instanceof Error ? err.message : String(err) };
  }
  return {};
}

/** Grades a harness run as its task's handler would: math from the final message, code by hidden tests, swe by the repository's tests. */
export async function gradeHarness<I>(ctx: EvalContext<I>, grader: HarnessGrader): Promise<EvalResult> {
  const a = ctx.run.artifacts;
  const harness = { exit_code: a.exit_code, timed_out: a.timed_out };
  if (typeof a.artifact_error === 'string') throw new RaasError('sandbox_error', `harness: ${a.artifact_error}`, { retryable: false });
  if (grader === 'math') {
    const inst = ctx.job.instance as unknown as MathInstance;
    const final = typeof a.final_message === 'string' ? a.final_message : '';
    const answer = lastBoxed(final) ?? lastBoxed(String(a.output_tail ?? ''));
    const ok = answersMatch(answer, inst.answer);
    return { reward: ok ? 1 : 0, resolved: ok, details: { answer: answer ?? null, ground_truth: inst.answer, harness } };
  }
  if (grader === 'code') {
    const code = a.solution;
    if (typeof code !== 'string' || code.trim() === '')
      return { reward: 0, resolved: false, details: { reason: `no /workspace/${SOLUTION_FILE} was written`, harness } };
    const cfg = section(ctx.config, 'code');
    const cctx = withConfig<CodeInstance>(ctx as StageContext<unknown>, cfg);
    const r = await runHiddenTests(cctx, code, {
      timeLimitS: cctx.job.instance.time_limit_s,
      stopAtFirstFailure: true,
      concurrency: configNumber(cfg, 'test_concurrency', 2),
      python: typeof cfg.python === 'string' ? cfg.python : 'python3',
    });
    const ok = r.passed === r.total;
    return { reward: ok ? 1 : 0, resolved: ok, details: { passed: r.passed, total: r.total, tests: r.results, harness } };
  }
  if (grader === 'swe') {
    const cfg = section(ctx.config, 'swe');
    const sctx = withConfig<SweInstance>(ctx as StageContext<unknown>, cfg);
    const patch = typeof a.git_patch === 'string' ? a.git_patch : '';
    const r = await evaluatePatch(sctx, patch, { testTimeoutS: configNumber(cfg, 'test_timeout_s', 300) });
    return {
      reward: r.resolved ? 1 : 0,
      resolved: r.resolved,
      details: { ...r.details, harness },
      ...(r.filter_reason ? { filter_reason: r.filter_reason } : {}),
    };
  }
  return { reward: 0, resolved: false, details: { graded: false, harness } };
}
