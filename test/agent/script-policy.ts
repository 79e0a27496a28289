import type { PolicyContext, SimPolicy } from '../../src/sim/policy.js';

/** A tool call as Qwen3 writes it. */
export const call = (name: string, args: Record<string, unknown>): string =>
  `<tool_call>\n${JSON.stringify({ name, arguments: args })}\n</tool_call>`;

/**
 * A scripted test policy for the real simulator: a prompt whose user message contains
 * `SCRIPT:<name>` gets turn k of that script, where k is the number of model turns already in the
 * prompt. Past the script's end the last turn repeats. Tests use it to make the model call tools.
 */
export function scriptPolicy(scripts: Record<string, Array<string | ((ctx: PolicyContext) => string)>>): SimPolicy {
  return {
    name: 'test-script',
    respond(ctx) {
      const m = /SCRIPT:([\w-]+)/.exec(ctx.promptText);
      if (!m) return undefined;
      const script = scripts[m[1]!];
      if (!script) return undefined;
      const turn = ctx.promptText.split('<|im_start|>assistant').length - 2;
      const step = script[Math.min(turn, script.length - 1)]!;
      return { text: typeof step === 'string' ? step : step(ctx) };
    },
  };
}
