import { MathInstance, aliasesOf } from '../../../protocol/tasks.js';
import type { AgentHandler } from '../types.js';
import { firstMessages, runToolAgent, taskSchema } from '../common/run.js';
import { answersMatch, lastBoxed } from './grade.js';
import { agentOomReason, firstFilter, limitReason } from '../common/filter.js';

export { answersMatch, lastBoxed, normaliseAnswer } from './grade.js';

const SYSTEM = [
  'You are a careful mathematician. Solve the problem step by step.',
  'You may run Python with execute_ipython_cell to compute or check values, and use think to plan.',
  'When you are done, write the final answer as \\boxed{...} and call finish with the same answer.',
].join(' ');

const INSTRUCTION = 'Put your final answer within \\boxed{}.';

/** The user message: the problem, with the answer-format instruction when the problem lacks one. */
export function mathPrompt(problem: string): string {
  return /\\boxed/.test(problem) ? problem : `${problem}\n\n${INSTRUCTION}`;
}

/**
 * Built-in `math` handler (ProRL's `deepscaler`): tools python, think, finish in a sandbox; the reward
 * is 1 when the finish answer (or else the last `\boxed{}` the model wrote) equals the ground truth
 * after normalisation. EVAL needs no sandbox.
 */
export const mathHandler: AgentHandler<MathInstance> = {
  name: 'math',
  aliases: aliasesOf('math'),
  instance: taskSchema(MathInstance),
  async init(ctx) {
    const runtime = await ctx.sandboxes.open({ tools: ['python'], network: false }, ctx.signal);
    return { runtime };
  },
  async run(ctx) {
    const inst = ctx.job.instance;
    const { trajectory, run } = await runToolAgent(ctx, {
      messages: firstMessages(SYSTEM, mathPrompt(inst.problem), inst.prompt_messages),
      tools: ['execute_ipython_cell', 'think', 'finish'],
      finishWithAnswer: true,
      defaults: { max_iterations: 10 },
    });
    run.artifacts.answer = extractAnswer(trajectory.final, run.messages);
    return run;
  },
  async eval(ctx) {
    const answer = typeof ctx.run.artifacts.answer === 'string' ? ctx.run.artifacts.answer : undefined;
    const ok = answersMatch(answer, ctx.job.instance.answer);
    const filter = firstFilter(ctx.config, agentOomReason(ctx.run), limitReason(ctx.run, ok));
    return {
      reward: ok ? 1 : 0,
      resolved: ok,
      details: { answer: answer ?? null, ground_truth: ctx.job.instance.answer },
      ...(filter ? { filter_reason: filter } : {}),
    };
  },
};

/** The finish call's answer, else the last `\boxed{}` of the latest assistant message that has one. */
export function extractAnswer(
  final: Record<string, unknown> | undefined,
  messages: ReadonlyArray<{ role: string; content: string }>,
): string | undefined {
  const a = final?.answer;
  if ((typeof a === 'string' && a.trim() !== '') || typeof a === 'number') return String(a);
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role !== 'assistant') continue;
    const boxed = lastBoxed(m.content);
    if (boxed !== undefined) return boxed;
  }
  const msg = final?.message;
  return typeof msg === 'string' ? lastBoxed(msg) : undefined;
}

/** @public The module form of the built-in handler (a `handlers.<name>.module` path can point at it). */
export default mathHandler;
