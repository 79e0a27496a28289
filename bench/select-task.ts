/**
 * The workload of `npm run bench:select`: a one-turn question task whose difficulty is the
 * simulator's (src/sim/difficulty.ts, `logit` model), so per-prompt pass rates spread the way a
 * real dataset's do and move as the weights update.
 * - `pickHandler` (rollout server): asks "Question q17: what is its code word?", earns reward 1 when
 *   the reply names the instance's word. No sandbox, no tools.
 * - `pickPolicy` (simulated backend): recognises the question and answers the right word with the
 *   backend's pass rate for that instance (PolicyContext.passRate: the difficulty model), else a
 *   wrong one, followed by a reasoning-length tail of words (lognormal length), so decode time
 *   varies as it does with real answers.
 */
import { writeFileSync } from 'node:fs';
import { z } from 'zod';
import type { AgentHandler } from '../src/server/handlers/types.js';
import type { PolicyContext, SimPolicy } from '../src/sim/policy.js';

export const PICK = 'pick';

const PickInstance = z.looseObject({ question: z.string(), answer: z.string() });
type PickInstance = z.infer<typeof PickInstance>;

/** The rollout server's side: one model turn, graded by the word it names. */
export const pickHandler: AgentHandler<PickInstance> = {
  name: PICK,
  instance: PickInstance,
  async init() {
    return {};
  },
  async run(ctx) {
    const { tokenizer: tok, llm, signal } = ctx;
    const user = {
      role: 'user' as const,
      content: `Question ${ctx.job.instance.question}: what is its code word? Think, then give it as "The answer is <word>."`,
    };
    const prompt = tok.renderPrompt([user], { enableThinking: false });
    const budget = (ctx.job.samplingParams.max_tokens_per_turn as number | undefined) ?? 1024;
    const r = await llm.generate({ prompt_ids: prompt, max_tokens: budget, stop_token_ids: [tok.eosId], signal });
    const ended = r.ids[r.ids.length - 1] === tok.eosId;
    const text = tok.decode(ended ? r.ids.slice(0, -1) : r.ids);
    return {
      messages: [user, { role: 'assistant', content: text, token_ids: r.ids, logprobs: r.logprobs }],
      tokens: {
        prompt_ids: prompt,
        response_ids: r.ids,
        response_mask: r.ids.map(() => 1),
        logprobs: r.logprobs,
        spans: [{ message_index: 1, start: 0, end: r.ids.length }],
      },
      finish_reason: ended ? 'finish' : 'max_response_tokens',
      artifacts: { said: /The answer is (\S+?)\./.exec(text)?.[1] ?? null },
      num_turns: 1,
    };
  },
  async eval(ctx) {
    const ok = ctx.run.artifacts.said === ctx.job.instance.answer;
    return { reward: ok ? 1 : 0, resolved: ok };
  },
};

const WORDS = ['so', 'the', 'value', 'follows', 'from', 'this', 'step', 'and', 'we', 'check', 'it', 'again'];

/** The simulated model's side: right with the difficulty model's pass rate, a tail of `median` tokens (lognormal, σ 0.7). */
export function pickPolicy(median = 150): SimPolicy {
  return {
    name: PICK,
    respond(ctx: PolicyContext) {
      const m = /Question (q\d+): what is its code word\?/.exec(ctx.promptText);
      if (!m) return undefined;
      const id = m[1]!;
      const p = ctx.passRate ? ctx.passRate(`${PICK}:${id}`, 0.5) : 0.5;
      const right = ctx.rng() < p;
      const u = ctx.rng() || 1e-12;
      const len = Math.max(8, Math.round(median * Math.exp(0.7 * Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * ctx.rng()))));
      const tail = Array.from({ length: len }, () => WORDS[Math.floor(ctx.rng() * WORDS.length)]).join(' ');
      return { text: `${tail}. The answer is ${right ? wordOf(id) : `not-${wordOf(id)}`}.` };
    },
  };
}

const wordOf = (id: string): string => `w${id.slice(1)}`;

/** Writes `count` prompts of the task (JSONL) to `file`. */
export function writePickDataset(file: string, count: number): void {
  const rows = Array.from({ length: count }, (_, i) =>
    JSON.stringify({ data_source: PICK, instance_id: `q${i}`, question: `q${i}`, answer: wordOf(`q${i}`) }),
  );
  writeFileSync(file, rows.join('\n') + '\n');
}
