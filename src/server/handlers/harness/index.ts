import { RaasError, fieldPath } from '../../../protocol/errors.js';
import { HarnessInstance, type HarnessGrader } from '../../../protocol/harness.js';
import { CodeInstance, MathInstance, SweInstance, normaliseRow } from '../../../protocol/tasks.js';
import { sharedGatewayHost } from '../../gateway/shared.js';
import type { GatewayEndpoint } from '../../gateway/host.js';
import type { Sandbox, SandboxSpec } from '../../sandbox/types.js';
import { codePrompt } from '../code/index.js';
import { agentOomReason, firstFilter, limitReason, oomKills } from '../common/filter.js';
import { mathPrompt } from '../math/index.js';
import { initRepo, repoMaterial, repoSpec } from '../swe/repo.js';
import { swePrompt } from '../swe/index.js';
import type { AgentHandler, StageContext } from '../types.js';
import { harnessConfig, pickHarness } from './config.js';
import { gradeHarness, readArtifacts } from './grade.js';
import { GATEWAY_INSIDE, harnessInside, runHarness } from './run.js';

/** The task schema of each grader: a harness instance carries its grader's task fields. */
const TASKS = { math: MathInstance, code: CodeInstance, swe: SweInstance } as const;

/** Each job's gateway endpoint, from INIT (which binds its directory into the sandbox) to the end of RUN. */
const endpoints = new WeakMap<Sandbox, GatewayEndpoint>();

/**
 * The grader a row implies when it names none, so an existing math, code or swe dataset runs as a
 * harness task by setting only `dataset.data_source: harness`.
 */
function graderOf(inst: Record<string, unknown>): HarnessGrader {
  if (typeof inst.problem_statement === 'string') return 'swe';
  if (Array.isArray(inst.tests)) return 'code';
  if (inst.answer !== undefined) return 'math';
  return 'none';
}

/** The prompt a harness gets: the instance's own, else its grader task's prompt. */
function promptOf(inst: HarnessInstance, config: Record<string, unknown>): string {
  if (inst.prompt) return inst.prompt;
  const g = inst.grader;
  if (g === 'math') return mathPrompt((inst as unknown as MathInstance).problem);
  if (g === 'code') return codePrompt((inst as unknown as CodeInstance).problem);
  if (g === 'swe') return swePrompt(inst as unknown as SweInstance, (config.swe ?? {}) as Record<string, unknown>);
  throw new RaasError('invalid_instance', 'instance.prompt is required when grader is "none"', { retryable: false });
}

/**
 * Built-in `harness` handler: runs an unmodified agent CLI in the job's sandbox, its LLM calls
 * going through the job's token-exact gateway. INIT opens the sandbox (a repository for the swe
 * grader) with the gateway's directory and the harness's directory bound read-only; RUN starts the
 * configured command with the task prompt and the gateway's URLs and waits for it under its
 * timeout and the job's signal; EVAL grades with the task's grader and records the harness's exit
 * status and the tail of its output (docs/agent-gateway.md).
 */
export const harnessHandler: AgentHandler<HarnessInstance> = {
  name: 'harness',
  instance: HarnessInstance,
  checkInstance(raw) {
    const inst = { ...raw, grader: raw.grader ?? graderOf(raw) };
    if (inst.grader === 'none') {
      if (!inst.prompt)
        throw new RaasError('invalid_instance', 'instance.prompt is required when grader is "none" (or set grader: math, code or swe)');
      return inst;
    }
    const r = TASKS[inst.grader].safeParse(normaliseRow(inst));
    if (!r.success) {
      const issue = r.error.issues[0]!;
      throw new RaasError('invalid_instance', `instance.${fieldPath(issue.path)}: ${issue.message} (grader ${inst.grader})`);
    }
    return { ...inst, ...(r.data as Record<string, unknown>), grader: inst.grader };
  },
  async init(ctx) {
    const cfg = harnessConfig(ctx.config);
    const { name, spec } = pickHarness(cfg, ctx.job.instance.harness);
    const host = await sharedGatewayHost();
    const endpoint = host.endpoint();
    // A job cancelled before RUN closes its endpoint here; RUN closes it otherwise.
    ctx.signal.addEventListener('abort', () => void endpoint.close(), { once: true });
    try {
      const readOnly = [
        { host: endpoint.dir, inside: GATEWAY_INSIDE },
        ...(spec.dir ? [{ host: spec.dir, inside: harnessInside(name) }] : []),
      ];
      let runtime: Sandbox;
      const metadata: Record<string, unknown> = { harness: name };
      if (ctx.job.instance.grader === 'swe') {
        const sctx = ctx as unknown as StageContext<SweInstance>;
        const material = await repoMaterial(sctx);
        const base = repoSpec(material);
        runtime = await ctx.sandboxes.open(
          { ...base, limits: { ...base.limits, memory_mb: cfg.memory_mb }, readOnly: [...(base.readOnly ?? []), ...readOnly] },
          ctx.signal,
        );
        metadata.base_commit = await initRepo(runtime, material, ctx.signal);
      } else {
        const spec: SandboxSpec = { network: false, tools: ['editor'], readOnly, limits: { memory_mb: cfg.memory_mb } };
        runtime = await ctx.sandboxes.open(spec, ctx.signal);
      }
      endpoints.set(runtime, endpoint);
      return { runtime, metadata };
    } catch (err) {
      await endpoint.close();
      throw err;
    }
  },
  async run(ctx) {
    const cfg = harnessConfig(ctx.config);
    const { name, spec } = pickHarness(cfg, ctx.job.instance.harness);
    const sandbox = ctx.runtime;
    const endpoint = sandbox && endpoints.get(sandbox);
    if (!sandbox || !endpoint) throw new RaasError('sandbox_error', 'harness: INIT left no sandbox with a gateway endpoint');
    const out = await runHarness(ctx, { cfg, name, spec, endpoint, sandbox, prompt: promptOf(ctx.job.instance, ctx.config) });
    const rec = out.record;
    const artifacts: Record<string, unknown> = {
      harness: name,
      exit_code: out.exit_code,
      signal: out.signal,
      timed_out: out.timed_out,
      output_tail: out.output_tail,
      final_message: rec.final_message,
      gateway: rec.stats,
      asked: rec.asked,
      segments: rec.segments,
      main_segment: rec.main,
      agent_oom_kills: oomKills(sandbox),
    };
    if (!ctx.signal.aborted) Object.assign(artifacts, await readArtifacts(ctx, sandbox));
    return {
      messages: rec.messages,
      tokens: rec.tokens,
      finish_reason: out.finish_reason,
      artifacts,
      num_turns: rec.stats.calls,
      tools: [],
    };
  },
  async eval(ctx) {
    const cfg = harnessConfig(ctx.config);
    const r = await gradeHarness(ctx, ctx.job.instance.grader as HarnessGrader);
    const invalid = (ctx.run.artifacts.gateway as { invalid_tool_calls?: number } | undefined)?.invalid_tool_calls ?? 0;
    const zeroed = cfg.zero_reward_on_invalid_tool_calls && invalid > 0;
    const filter = firstFilter(ctx.config, agentOomReason(ctx.run), limitReason(ctx.run, r.resolved));
    return {
      reward: zeroed ? 0 : r.reward,
      resolved: r.resolved,
      details: { ...r.details, ...(zeroed ? { reward_zeroed: `${invalid} tool call(s) did not parse` } : {}) },
      ...((r.filter_reason ?? filter) ? { filter_reason: r.filter_reason ?? filter } : {}),
    };
  },
  finalResult(ctx) {
    const a = ctx.run.artifacts;
    const segments = a.segments as unknown[] | undefined;
    return {
      ...(segments && segments.length > 1 ? { segments } : {}),
      harness: { name: a.harness, exit_code: a.exit_code, signal: a.signal, timed_out: a.timed_out, output_tail: a.output_tail },
      gateway: { ...(a.gateway as object), main_segment: a.main_segment, calls_asked: a.asked },
    } as Record<string, unknown>;
  },
};

/** @public The module form of the built-in handler (a `handlers.<name>.module` path can point at it). */
export default harnessHandler;
