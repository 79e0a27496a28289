import { z } from 'zod';
import { ContextLengthError, cancellationKind } from '../../protocol/errors.js';
import type { FinishReason, Message, Tokens } from '../../protocol/process.js';
import { rng, seedOf } from '../../util/hash.js';
import { lengthLimits, nextMaxTokens } from '../llm/limits.js';
import type { AgentHandler, RunContext, RunResult } from './types.js';

/** The fixed user message every chat turn sends. */
export const CHAT_USER_MESSAGE = 'Tell me one more short fact about the sea.';

/** A chat instance: `{data_source: "chat", instance_id, turns, pass_rate}`. */
export const ChatInstance = z.looseObject({
  data_source: z.string().optional(),
  task: z.string().optional(),
  instance_id: z.union([z.string(), z.number()]).optional(),
  /** Model turns per trajectory. */
  turns: z.number().int().positive().max(1000).default(1),
  /** Probability that EVAL gives reward 1, drawn with the job's seed. */
  pass_rate: z.number().min(0).max(1).default(0.5),
});
export type ChatInstance = z.infer<typeof ChatInstance>;

/**
 * Built-in `chat` handler: a multi-turn conversation without sandbox or tools, for tests and
 * benchmarks that need many cheap jobs. The model's ids are appended unchanged; each next prompt is
 * the previous prompt, the generated ids and the tokenised observation.
 */
export const chatHandler: AgentHandler<ChatInstance> = {
  name: 'chat',
  instance: ChatInstance,
  async init() {
    return {};
  },
  run: runChat,
  async eval(ctx) {
    const draw = rng(seedOf(ctx.job.seed, 'chat-eval'))();
    const reward = draw < ctx.job.instance.pass_rate ? 1 : 0;
    return { reward, resolved: reward === 1 };
  },
};

/** The prompt and observation ids are the same for every chat job: computed once per tokenizer. */
const fixedIds = new WeakMap<object, Map<boolean, { prompt: number[]; observation: number[] }>>();
function chatIds(tokenizer: RunContext<ChatInstance>['tokenizer'], enableThinking: boolean): { prompt: number[]; observation: number[] } {
  let byMode = fixedIds.get(tokenizer);
  if (!byMode) fixedIds.set(tokenizer, (byMode = new Map()));
  let ids = byMode.get(enableThinking);
  if (!ids) {
    const msg = [{ role: 'user' as const, content: CHAT_USER_MESSAGE }];
    ids = { prompt: tokenizer.renderPrompt(msg, { enableThinking }), observation: tokenizer.observationIds(msg, { enableThinking }) };
    byMode.set(enableThinking, ids);
  }
  return ids;
}

async function runChat(ctx: RunContext<ChatInstance>): Promise<RunResult> {
  const { tokenizer, llm, signal } = ctx;
  const sp = ctx.job.samplingParams;
  const enableThinking = sp.enable_thinking ?? false;
  const limits = lengthLimits(sp, { max_tokens_per_turn: (ctx.config.max_tokens_per_turn as number | undefined) ?? 256 });
  const user: Message = { role: 'user', content: CHAT_USER_MESSAGE };
  const messages: Message[] = [user];
  const fixed = chatIds(tokenizer, enableThinking);
  const promptIds = [...fixed.prompt];
  const tokens: Tokens = { prompt_ids: promptIds, response_ids: [], response_mask: [], logprobs: [], spans: [] };
  const withInputIds = sp.token_level_generation === true || sp.return_message_ids === true;
  let generated = 0;
  let turns = 0;
  let finish: FinishReason = 'finish';
  const stop = sp.stop_token_ids ?? [...tokenizer.stopIds];
  try {
    const modelLen = await llm.maxModelLen(signal);
    for (let t = 0; t < ctx.job.instance.turns; t++) {
      // The observation: close the model's turn if it did not end with eos, then the user turn and
      // the generation prompt exactly as the template renders them.
      const last = tokens.response_ids[tokens.response_ids.length - 1];
      const obs = t === 0 ? [] : [...(last === tokenizer.eosId ? [] : [tokenizer.eosId]), ...fixed.observation];
      const promptLen = tokens.prompt_ids.length + tokens.response_ids.length + obs.length;
      // No room for another turn: stop before appending an observation nothing would answer.
      const next = nextMaxTokens(limits, generated, promptLen, modelLen);
      if ('finish' in next) {
        finish = next.finish;
        break;
      }
      if (t > 0) {
        append(tokens, obs, 0, undefined, messages.length);
        messages.push({ ...user });
      }
      const prompt = [...tokens.prompt_ids, ...tokens.response_ids];
      const r = await llm.generate({ prompt_ids: prompt, max_tokens: next.max_tokens, stop_token_ids: stop, signal });
      turns++;
      generated += r.ids.length;
      append(tokens, r.ids, 1, r.logprobs, messages.length);
      const text = tokenizer.decode(r.ids[r.ids.length - 1] === tokenizer.eosId ? r.ids.slice(0, -1) : r.ids);
      messages.push({
        role: 'assistant',
        content: text,
        token_ids: r.ids,
        logprobs: r.logprobs,
        ...(withInputIds ? { input_ids: prompt } : {}),
      });
      if (r.finish_reason === 'length' && next.cause !== 'per_turn') {
        finish = next.cause === 'response' ? 'max_response_tokens' : 'max_model_len';
        break;
      }
    }
  } catch (err) {
    if (err instanceof ContextLengthError) finish = 'max_model_len';
    else {
      const kind = cancellationKind(signal.aborted ? signal.reason : err);
      if (!kind) throw err;
      finish = kind === 'timeout' ? 'timeout' : 'cancelled';
    }
  }
  return { messages, tokens, finish_reason: finish, artifacts: {}, num_turns: turns };
}

function append(tokens: Tokens, ids: readonly number[], mask: 0 | 1, logprobs: readonly number[] | undefined, messageIndex: number): void {
  const start = tokens.response_ids.length;
  for (let i = 0; i < ids.length; i++) {
    tokens.response_ids.push(ids[i]);
    tokens.response_mask.push(mask);
    tokens.logprobs.push(mask === 1 ? (logprobs?.[i] ?? 0) : 0);
  }
  tokens.spans!.push({ message_index: messageIndex, start, end: tokens.response_ids.length });
}
