import { SweInstance, aliasesOf } from '../../../protocol/tasks.js';
import type { AgentHandler } from '../types.js';
import { configNumber, firstMessages, runToolAgent, taskSchema } from '../common/run.js';
import { capturePatch, initRepo, repoSpec } from './repo.js';
import { evaluatePatch } from './evaluate.js';

export { evaluatePatch } from './evaluate.js';

const SYSTEM = [
  'You are a software engineer fixing a bug in the repository at /workspace (a git repository).',
  'Tools: execute_bash runs shell commands, str_replace_editor views and edits files, execute_ipython_cell runs Python, think records reasoning.',
  'Find the cause of the issue, change the code (not the tests) to fix it, run the tests, then call finish. Your changes are collected with git diff.',
].join(' ');

/** The user message: the issue and how the tests are run. */
export function swePrompt(inst: SweInstance): string {
  return `${inst.problem_statement}\n\nThe repository is in /workspace. Tests run with: ${inst.test_command}`;
}

/**
 * Built-in `swe` handler: INIT materialises the repository (files map or tarball) and commits it;
 * RUN lets the model edit it and captures `git diff` as `git_patch`; EVAL applies the patch to a
 * fresh copy in a fresh sandbox and runs FAIL_TO_PASS and PASS_TO_PASS; reward 1 only if all pass.
 */
export const sweHandler: AgentHandler<SweInstance> = {
  name: 'swe',
  aliases: aliasesOf('swe'),
  instance: taskSchema(SweInstance),
  async init(ctx) {
    const runtime = await ctx.sandboxes.open(await repoSpec(ctx.job.instance, ctx.signal), ctx.signal);
    await initRepo(runtime, ctx.job.instance, ctx.signal);
    return { runtime };
  },
  async run(ctx) {
    const inst = ctx.job.instance;
    const { run } = await runToolAgent(ctx, {
      messages: firstMessages(SYSTEM, swePrompt(inst), inst.prompt_messages),
      tools: ['execute_bash', 'str_replace_editor', 'execute_ipython_cell', 'think', 'finish'],
      defaults: { max_iterations: 30 },
      nudge: 'Continue with the tools: fix the issue in /workspace, run the tests, then call finish.',
    });
    // The patch is captured even when the trajectory was cut: partial work is what gets graded.
    // A failed capture (a sandbox that died) grades as an empty patch instead of losing the trajectory.
    if (ctx.runtime && !ctx.signal.aborted) {
      try {
        run.artifacts.git_patch = await capturePatch(ctx.runtime, ctx.signal);
      } catch (err) {
        if (ctx.signal.aborted) throw err;
        run.artifacts.git_patch = '';
        run.artifacts.capture_error = err instanceof Error ? err.message : String(err);
        ctx.log.warn({ job_id: ctx.job.id, err: run.artifacts.capture_error }, 'swe: could not capture git diff');
      }
    }
    return run;
  },
  async eval(ctx) {
    const patch = typeof ctx.run.artifacts.git_patch === 'string' ? ctx.run.artifacts.git_patch : '';
    const r = await evaluatePatch(ctx, patch, { testTimeoutS: configNumber(ctx.config, 'test_timeout_s', 300) });
    return { reward: r.resolved ? 1 : 0, resolved: r.resolved, details: r.details };
  },
};

export default sweHandler;
