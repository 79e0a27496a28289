import { RaasError } from '../../../protocol/errors.js';
import { SweInstance, aliasesOf, type SweHandlerConfig } from '../../../protocol/tasks.js';
import type { AgentHandler } from '../types.js';
import { configNumber, firstMessages, runToolAgent, taskSchema } from '../common/run.js';
import { capturePatch, initRepo, repoMaterial, repoSpec } from './repo.js';
import { gradingPlan } from './plan.js';
import { agentOomReason, firstFilter, limitReason } from '../common/filter.js';
import { evaluatePatch } from './evaluate.js';
import { checkDataFile } from './tarball.js';
import { imageSpec, initImageRepo, instanceImage } from './image.js';

export { evaluatePatch } from './evaluate.js';

/** The system message; `dir` is where the repository is (/workspace, or an image's /testbed). */
function system(dir: string): string {
  return [
    `You are a software engineer fixing a bug in the repository at ${dir} (a git repository).`,
    'Tools: execute_bash runs shell commands, str_replace_editor views and edits files, execute_ipython_cell runs Python, think records reasoning.',
    'Find the cause of the issue, change the code (not the tests) to fix it, run the tests, then call finish. Your changes are collected with git diff.',
  ].join(' ');
}

/** The user message: the issue and how the tests are run (`config`: the server's handlers.swe; `dir`: where the repository is). */
export function swePrompt(inst: SweInstance, config: SweHandlerConfig = {}, dir = '/workspace'): string {
  return `${inst.problem_statement}\n\nThe repository is in ${dir}. Tests run with: ${gradingPlan(inst, config).command}`;
}

/**
 * Built-in `swe` handler: INIT opens a sandbox rooted in the instance's own image when
 * handlers.swe.images_dir has one (the repository is its /testbed, its environment runs everything),
 * else materialises the repository (files map, a tarball inside sandbox.data_dirs, or a SWE-bench
 * row's base commit from handlers.swe.repos_dir; nothing there: `critical_error: "init"` naming
 * the paths tried); RUN lets the model edit it and captures `git diff` as
 * `git_patch`; EVAL applies the patch to a fresh copy in a fresh sandbox, resets the test files
 * (test_files, test_patch, the files the test ids name), runs the test command once and grades its
 * log as SWE-bench does (evaluatePatch); reward 1 only when resolved.
 */
export const sweHandler: AgentHandler<SweInstance> = {
  name: 'swe',
  aliases: aliasesOf('swe'),
  instance: taskSchema(SweInstance),
  async checkInstance(inst, env) {
    if (inst.files || inst.tarball === undefined) return inst;
    // INIT reads the real path checked here (and checks that it still is that path).
    return {
      ...inst,
      tarball: await checkDataFile(inst.tarball, 'instance.tarball', { dataDirs: env.dataDirs, maxBytes: env.maxFileBytes }),
    };
  },
  prefetch(inst, config) {
    const image = instanceImage(inst, config as SweHandlerConfig);
    return image ? [image.ref] : [];
  },
  async init(ctx) {
    // A row with an image of its own (handlers.swe.images_dir): the sandbox is rooted in it, the
    // repository is its /testbed, and its environment runs the tools and the tests.
    const image = instanceImage(ctx.job.instance, ctx.config as SweHandlerConfig);
    if (image) {
      const runtime = await ctx.sandboxes.open(imageSpec(image), ctx.signal);
      const hide = (ctx.config as SweHandlerConfig).hide_history !== false;
      const base = await initImageRepo(runtime, ctx.job.instance.base_commit, hide, ctx.signal);
      return { runtime, metadata: { base_commit: base, image: image.ref } };
    }
    const material = await repoMaterial(ctx);
    const runtime = await ctx.sandboxes.open(repoSpec(material), ctx.signal);
    const base = await initRepo(runtime, material, ctx.signal);
    return { runtime, metadata: { base_commit: base, ...(material.kind === 'snapshot' ? { repo_source: material.source } : {}) } };
  },
  async run(ctx) {
    const inst = ctx.job.instance;
    const dir = ctx.runtime?.workspace ?? '/workspace';
    const { run } = await runToolAgent(ctx, {
      messages: firstMessages(system(dir), swePrompt(inst, ctx.config, dir), inst.prompt_messages),
      tools: ['execute_bash', 'str_replace_editor', 'execute_ipython_cell', 'think', 'finish'],
      defaults: { max_iterations: 30 },
      nudge: `Continue with the tools: fix the issue in ${dir}, run the tests, then call finish.`,
    });
    // The patch is captured even when the trajectory was cut: partial work is what gets graded.
    // A failed capture (a sandbox that died) grades as an empty patch instead of losing the trajectory.
    if (ctx.runtime && !ctx.signal.aborted) {
      try {
        const base = typeof ctx.init.metadata?.base_commit === 'string' ? ctx.init.metadata.base_commit : 'HEAD';
        run.artifacts.git_patch = await capturePatch(ctx.runtime, base, configNumber(ctx.config, 'max_patch_bytes', 16 << 20), ctx.signal);
      } catch (err) {
        if (ctx.signal.aborted) throw err;
        if (err instanceof RaasError && err.code === 'sandbox_limit') {
          // Over the cap: the job ends with that error in EVAL, keeping the trajectory.
          run.artifacts.git_patch = '';
          run.artifacts.patch_error = err.message;
          return run;
        }
        run.artifacts.git_patch = '';
        run.artifacts.capture_error = err instanceof Error ? err.message : String(err);
        ctx.log.warn({ job_id: ctx.job.id, err: run.artifacts.capture_error }, 'swe: could not capture git diff');
      }
    }
    return run;
  },
  async eval(ctx) {
    if (typeof ctx.run.artifacts.patch_error === 'string')
      throw new RaasError('sandbox_limit', ctx.run.artifacts.patch_error, { retryable: false });
    const patch = typeof ctx.run.artifacts.git_patch === 'string' ? ctx.run.artifacts.git_patch : '';
    const r = await evaluatePatch(ctx, patch, { testTimeoutS: configNumber(ctx.config, 'test_timeout_s', 300) });
    const filter = r.filter_reason ?? firstFilter(ctx.config, agentOomReason(ctx.run), limitReason(ctx.run, r.resolved));
    return { reward: r.resolved ? 1 : 0, resolved: r.resolved, details: r.details, ...(filter ? { filter_reason: filter } : {}) };
  },
};

/** @public The module form of the built-in handler (a `handlers.<name>.module` path can point at it). */
export default sweHandler;
