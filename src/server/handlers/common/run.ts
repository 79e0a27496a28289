import { z } from 'zod';
import type { StandardSchemaV1 } from '@standard-schema/spec';
import { normaliseRow } from '../../../protocol/tasks.js';
import type { ChatMessage } from '../../../tokens/tokenizer.js';
import { runAgent } from '../../agent/index.js';
import type { AgentTrajectory } from '../../agent/types.js';
import type { RunContext, RunResult } from '../types.js';
import { sandboxExecutor } from './executor.js';
import { oomKills } from './filter.js';
import { toolDefinitions, type ToolName } from './tools.js';

/** A task schema that first normalises veRL's row form onto the plain form (see normaliseRow). */
export function taskSchema<S extends z.ZodType>(schema: S): StandardSchemaV1<unknown, z.output<S>> {
  return z.preprocess(normaliseRow, schema) as unknown as StandardSchemaV1<unknown, z.output<S>>;
}

/** Reads a number from the handler's config section, with a default. */
export function configNumber(config: Record<string, unknown>, key: string, fallback: number): number {
  const v = config[key];
  return typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : fallback;
}

/**
 * The first prompt: the instance's own veRL messages when it came in that form (a system message
 * of ours added when it has none), else our system message and the user message.
 */
export function firstMessages(
  system: string,
  user: string,
  promptMessages?: Array<{ role: 'system' | 'user' | 'assistant'; content: string }>,
): ChatMessage[] {
  if (!promptMessages?.length)
    return [
      { role: 'system', content: system },
      { role: 'user', content: user },
    ];
  const msgs: ChatMessage[] = promptMessages.map((m) => ({ role: m.role, content: m.content }));
  return msgs[0]!.role === 'system' ? msgs : [{ role: 'system', content: system }, ...msgs];
}

/** Runs the token-level agent with CodeAct tools on the job's runtime sandbox. */
export async function runToolAgent<I>(
  ctx: RunContext<I>,
  opts: {
    messages: ChatMessage[];
    tools: readonly ToolName[];
    finishWithAnswer?: boolean;
    defaults?: { max_iterations?: number; max_tokens_per_turn?: number };
    /** Sent as the user's reply to a turn without tool calls (at most `max_nudges` times, default 2); without it such a turn ends the trajectory. */
    nudge?: string;
  },
): Promise<{ trajectory: AgentTrajectory; run: RunResult }> {
  const tools = toolDefinitions(opts.tools, { finishWithAnswer: opts.finishWithAnswer });
  const execute = sandboxExecutor(ctx.runtime, opts.tools, {
    bashTimeoutS: configNumber(ctx.config, 'bash_timeout_s', 120),
    pythonTimeoutS: configNumber(ctx.config, 'python_timeout_s', 60),
    noChangeTimeoutS: configNumber(ctx.config, 'no_change_timeout_s', 30),
  });
  let nudges = 0;
  const maxNudges = configNumber(ctx.config, 'max_nudges', 2);
  const trajectory = await runAgent({
    llm: ctx.llm,
    tokenizer: ctx.tokenizer,
    messages: opts.messages,
    tools,
    execute,
    samplingParams: ctx.job.samplingParams,
    signal: ctx.signal,
    onNoToolCall: opts.nudge === undefined ? undefined : () => (nudges++ < maxNudges ? opts.nudge : undefined),
    defaults: {
      max_iterations: configNumber(ctx.config, 'max_iterations', opts.defaults?.max_iterations ?? 30),
      max_tokens_per_turn: configNumber(ctx.config, 'max_tokens_per_turn', opts.defaults?.max_tokens_per_turn ?? 2048),
    },
  });
  const run: RunResult = {
    messages: trajectory.messages,
    tokens: trajectory.tokens,
    finish_reason: trajectory.finish_reason,
    // Processes the kernel killed for the sandbox's memory limit during RUN: NeMo-Gym masks such samples.
    artifacts: {
      final: trajectory.final ?? null,
      malformed_tool_calls: trajectory.malformed_tool_calls,
      agent_oom_kills: oomKills(ctx.runtime),
    },
    num_turns: trajectory.num_turns,
    tools,
  };
  return { trajectory, run };
}
