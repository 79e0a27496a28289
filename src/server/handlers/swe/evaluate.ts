import type { SweInstance } from '../../../protocol/tasks.js';
import type { Sandbox } from '../../sandbox/types.js';
import type { StageContext } from '../types.js';
import { GIT, initRepo, repoSpec } from './repo.js';

const PATCH_FILE = '.raas-model.patch';

/** Per-test outcome of an evaluation. */
export interface SweEvalDetails extends Record<string, unknown> {
  applied: boolean;
  apply_error?: string;
  FAIL_TO_PASS: Record<string, 'PASSED' | 'FAILED'>;
  PASS_TO_PASS: Record<string, 'PASSED' | 'FAILED'>;
}

/**
 * Applies `patch` to a fresh copy of the repository in a fresh sandbox and runs the listed tests.
 * All tests run together first; only when that fails does each run alone, to say which failed.
 */
export async function evaluatePatch(ctx: StageContext<SweInstance>, patch: string, opts: { testTimeoutS: number }): Promise<{ resolved: boolean; details: SweEvalDetails }> {
  const inst = ctx.job.instance;
  const details: SweEvalDetails = { applied: false, FAIL_TO_PASS: {}, PASS_TO_PASS: {} };
  const all = [...inst.FAIL_TO_PASS, ...inst.PASS_TO_PASS];
  const mark = (status: 'PASSED' | 'FAILED', only?: string) => {
    for (const t of inst.FAIL_TO_PASS) if (!only || only === t) details.FAIL_TO_PASS[t] = status;
    for (const t of inst.PASS_TO_PASS) if (!only || only === t) details.PASS_TO_PASS[t] = status;
  };
  if (patch.trim() === '') {
    mark('FAILED');
    details.apply_error = 'empty patch: the model changed nothing';
    return { resolved: false, details };
  }
  const sb = await ctx.sandboxes.open(await repoSpec(inst, ctx.signal, { [PATCH_FILE]: patch.endsWith('\n') ? patch : `${patch}\n` }), ctx.signal);
  try {
    await initRepo(sb, inst, ctx.signal);
    const applied = await sb.bash(`${GIT} apply --whitespace=nowarn ${PATCH_FILE} 2>&1; echo "exit=$?"`, { timeout_s: 60, signal: ctx.signal });
    if (!/exit=0\s*$/.test(applied.output.trim())) {
      details.apply_error = applied.output.replace(/exit=\d+\s*$/, '').trim().slice(0, 2000);
      mark('FAILED');
      return { resolved: false, details };
    }
    details.applied = true;
    if (await passes(sb, inst.test_command, all, opts.testTimeoutS, ctx.signal)) {
      mark('PASSED');
      return { resolved: true, details };
    }
    for (const t of all) mark((await passes(sb, inst.test_command, [t], opts.testTimeoutS, ctx.signal)) ? 'PASSED' : 'FAILED', t);
    const resolved = Object.values(details.FAIL_TO_PASS).every((s) => s === 'PASSED') && Object.values(details.PASS_TO_PASS).every((s) => s === 'PASSED');
    return { resolved, details };
  } finally {
    await sb.close();
  }
}

async function passes(sb: Sandbox, testCommand: string, ids: string[], timeoutS: number, signal: AbortSignal): Promise<boolean> {
  const quoted = ids.map((t) => `'${t.replace(/'/g, `'\\''`)}'`).join(' ');
  const r = await sb.bash(`timeout -k 5 ${timeoutS} ${testCommand} ${quoted} > .git/raas-test.log 2>&1; echo "exit=$?"`, { timeout_s: timeoutS + 15, signal });
  return !r.timed_out && /exit=0\s*$/.test(r.output.trim());
}
