import { z } from 'zod';
import { runAgent } from '../src/server/agent/index.js';
import type { AgentHandler } from '../src/server/handlers/types.js';
import { rng, seedOf } from '../src/util/hash.js';

/**
 * The routing benchmark's job: the built-in `chat` handler's multi-turn conversation (no sandbox, no
 * tools, filler answers, a fixed follow-up each turn, reward drawn with pass_rate), plus a shared
 * per-prompt document in the system turn. The built-in chat prompt is ~20 tokens, too short for
 * prefix-cache reuse to matter; real agent prompts (tool definitions, task statement, repository
 * context) are 1-3k tokens and shared by the n rollouts of a group, which is what group affinity is for.
 */
export const DocChatInstance = z.looseObject({
  data_source: z.string().optional(),
  instance_id: z.union([z.string(), z.number()]),
  turns: z.number().int().positive().max(100).default(4),
  doc_tokens: z.number().int().nonnegative().max(100_000).default(1500),
  pass_rate: z.number().min(0).max(1).default(0.5),
  /** Tokens of "tool output" in each follow-up: agent contexts grow by observations, per rollout. */
  obs_tokens: z.number().int().nonnegative().max(10_000).default(0),
});
export type DocChatInstance = z.infer<typeof DocChatInstance>;

const WORDS =
  'the of and to in is that for it as was with be by on not he this are or his from at which but have an they you were her she there been one all we their has would when if so no will more can out up into do said what some time could them other than only then its about two may first like these new also any very'.split(
    ' ',
  );

const docs = new Map<string, string>();
const prompts = new Map<string, number[]>();
/** A deterministic document of about `n` tokens (common words are one Qwen3 token each). */
function documentFor(id: string, n: number): string {
  const key = `${id}:${n}`;
  let d = docs.get(key);
  if (!d) {
    const r = rng(seedOf('doc', key));
    d = `Reference document ${id}.\n${Array.from({ length: n }, () => WORDS[Math.floor(r() * WORDS.length)]).join(' ')}`;
    docs.set(key, d);
  }
  return d;
}

/** The `doc-chat` handler, registered by the benchmark through startRolloutServer's `handlers`. */
export const docChatHandler: AgentHandler<DocChatInstance> = {
  name: 'doc-chat',
  instance: DocChatInstance,
  async init() {
    return {};
  },
  async run(ctx) {
    const inst = ctx.job.instance;
    const messages = [
      { role: 'system' as const, content: documentFor(String(inst.instance_id), inst.doc_tokens) },
      { role: 'user' as const, content: 'Summarise the document in a few words.' },
    ];
    // The 8 rollouts of a group share the prompt: tokenise it once.
    const key = `${inst.instance_id}:${inst.doc_tokens}`;
    let promptIds = prompts.get(key);
    if (!promptIds) prompts.set(key, (promptIds = ctx.tokenizer.renderPrompt(messages, { enableThinking: false })));
    const t = await runAgent({
      llm: ctx.llm,
      tokenizer: ctx.tokenizer,
      messages,
      promptIds,
      tools: [],
      execute: async () => ({ observation: '' }),
      samplingParams: { ...ctx.job.samplingParams, enable_thinking: false, max_iterations: inst.turns },
      signal: ctx.signal,
      onNoToolCall: (_text, turn) => {
        const r = rng(seedOf(ctx.job.seed, 'obs', turn));
        const output = Array.from({ length: inst.obs_tokens }, () => WORDS[Math.floor(r() * WORDS.length)]).join(' ');
        return `Tool output:\n${output}\nTell me one more thing about it (${turn + 2}).`;
      },
    });
    return { messages: t.messages, tokens: t.tokens, finish_reason: t.finish_reason, artifacts: {}, num_turns: t.num_turns };
  },
  async eval(ctx) {
    const reward = rng(seedOf(ctx.job.seed, 'doc-chat-eval'))() < ctx.job.instance.pass_rate ? 1 : 0;
    return { reward, resolved: reward === 1 };
  },
};
