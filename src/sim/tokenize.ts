import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ChatMessage } from '../tokens/tokenizer.js';
import type { SimEngine } from './engine.js';
import { vllmError } from './vllm.js';

// vLLM's TokenizeRequest = TokenizeCompletionRequest | TokenizeChatRequest
// (vllm/entrypoints/serve/tokenize/protocol.py@343baca:23): extra keys pass (pydantic ignores them).
const CompletionBody = z.looseObject({
  model: z.string().nullish(),
  prompt: z.union([z.string(), z.array(z.string())]),
  add_special_tokens: z.boolean().default(true),
  return_token_strs: z.boolean().nullish(),
});
const ChatBody = z.looseObject({
  model: z.string().nullish(),
  messages: z.array(z.looseObject({ role: z.enum(['system', 'user', 'assistant', 'tool']), content: z.string() })),
  add_generation_prompt: z.boolean().default(true),
  continue_final_message: z.boolean().default(false),
  add_special_tokens: z.boolean().default(false),
  return_token_strs: z.boolean().nullish(),
});

/**
 * The tokenize routes of both servers, on the simulator's tokenizer: vLLM's `POST /tokenize`
 * (answer `{count, max_model_len, tokens, token_strs}`, vllm/entrypoints/serve/tokenize/api_router.py@b91ee1b:38)
 * and SGLang's `POST /v1/tokenize` (answer `{tokens, count, max_model_len}`, a list prompt gives lists;
 * SGLang also serves it at /tokenize, python/sglang/srt/entrypoints/openai/serving_tokenize.py@0351c1f).
 * `tokenize_perturb` adds a constant to every id (a backend whose tokenizer differs);
 * `tokenize_route: false` leaves both routes out (404, as an older server).
 */
export function registerTokenizeRoutes(app: FastifyInstance, engine: SimEngine): void {
  const cfg = engine.cfg;
  if (!cfg.tokenize_route) return;
  const tok = engine.tokenizer;
  const ids = (text: string): number[] => tok.encode(text).map((i) => i + cfg.tokenize_perturb);
  const strs = (xs: number[]): string[] => xs.map((i) => tok.decode([i - cfg.tokenize_perturb]));

  app.post('/tokenize', async (request, reply) => {
    const body = (request.body ?? {}) as Record<string, unknown>;
    if ('messages' in body) {
      const p = ChatBody.safeParse(body);
      if (!p.success) return vllmError(reply, 400, `${p.error.issues[0]!.path.join('.')}: ${p.error.issues[0]!.message}`);
      if (p.data.continue_final_message && p.data.add_generation_prompt)
        return vllmError(reply, 400, 'Cannot set both `continue_final_message` and `add_generation_prompt` to True.');
      const text = tok.renderText(p.data.messages as ChatMessage[], { addGenerationPrompt: p.data.add_generation_prompt });
      const tokens = ids(text);
      return { count: tokens.length, max_model_len: cfg.max_model_len, tokens, token_strs: p.data.return_token_strs ? strs(tokens) : null };
    }
    const p = CompletionBody.safeParse(body);
    if (!p.success) return vllmError(reply, 400, `${p.error.issues[0]!.path.join('.') || 'prompt'}: ${p.error.issues[0]!.message}`);
    if (Array.isArray(p.data.prompt)) {
      // SGLang's list form (vLLM takes one string).
      const lists = p.data.prompt.map(ids);
      return { tokens: lists, count: lists.map((l) => l.length), max_model_len: cfg.max_model_len };
    }
    const tokens = ids(p.data.prompt);
    return { count: tokens.length, max_model_len: cfg.max_model_len, tokens, token_strs: p.data.return_token_strs ? strs(tokens) : null };
  });

  app.post('/v1/tokenize', async (request, reply) => {
    const p = CompletionBody.safeParse(request.body ?? {});
    if (!p.success)
      return reply.code(400).send({
        object: 'error',
        message: `${p.error.issues[0]!.path.join('.') || 'prompt'}: ${p.error.issues[0]!.message}`,
        type: 'Bad Request',
        param: null,
        code: 400,
      });
    const prompt = p.data.prompt;
    if (Array.isArray(prompt)) {
      const lists = prompt.map(ids);
      return { tokens: lists, count: lists.map((l) => l.length), max_model_len: cfg.max_model_len };
    }
    const tokens = ids(prompt);
    return { tokens, count: tokens.length, max_model_len: cfg.max_model_len };
  });
}
