import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { z } from 'zod';
import type { SimEngine, SimOutput } from './engine.js';
import { clientGone } from './http-util.js';

/** vLLM's `/v1/completions` body, the fields the simulator honours (others pass, as pydantic ignores them). */
const CompletionRequest = z.looseObject({
  model: z.string().nullish(),
  prompt: z.union([
    z.array(z.number().int().nonnegative()),
    z.array(z.array(z.number().int().nonnegative())).min(1),
    z.string(),
    z.array(z.string()).min(1),
  ]),
  max_tokens: z.number().int().min(0).nullish(),
  temperature: z.number().min(0).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  top_k: z.number().int().min(-1).nullish(),
  n: z.number().int().min(1).max(64).nullish(),
  seed: z.number().int().nullish(),
  logprobs: z.number().int().min(-1).nullish(),
  return_token_ids: z.boolean().nullish(),
  return_tokens_as_token_ids: z.boolean().nullish(),
  skip_special_tokens: z.boolean().nullish(),
  include_stop_str_in_output: z.boolean().nullish(),
  stop_token_ids: z.array(z.number().int()).nullish(),
  stream: z.boolean().nullish(),
  request_id: z.string().nullish(),
  // The other sampling fields of vLLM's CompletionRequest (vllm/entrypoints/openai/protocol.py@ec3b890,
  // completion-sampling-params), with SamplingParams._verify_args' ranges (vllm/sampling_params.py@db57383):
  // accepted and recorded in the request log; the simulated policy does not model them.
  min_p: z.number().min(0).max(1).nullish(),
  presence_penalty: z.number().min(-2).max(2).nullish(),
  frequency_penalty: z.number().min(-2).max(2).nullish(),
  repetition_penalty: z.number().gt(0).max(2).nullish(),
  min_tokens: z.number().int().min(0).nullish(),
  ignore_eos: z.boolean().nullish(),
  stop: z.union([z.string(), z.array(z.string())]).nullish(),
  logit_bias: z.record(z.string(), z.number()).nullish(),
  allowed_token_ids: z.array(z.number().int()).nullish(),
  structured_outputs: z.looseObject({ json: z.unknown().optional(), regex: z.string().nullish(), grammar: z.string().nullish() }).nullish(),
});

/** The request's sampling fields beyond those the engine uses, for the request log. */
const LOGGED_VLLM = [
  'min_p',
  'presence_penalty',
  'frequency_penalty',
  'repetition_penalty',
  'min_tokens',
  'ignore_eos',
  'stop',
  'logit_bias',
  'allowed_token_ids',
  'structured_outputs',
] as const;

/** vLLM's error body: `{error: {message, type, param, code}}` with code = HTTP status. */
export function vllmError(reply: FastifyReply, status: number, message: string, param: string | null = null): FastifyReply {
  const type = status === 400 ? 'BadRequestError' : status === 404 ? 'NotFoundError' : 'InternalServerError';
  return reply.code(status).send({ error: { message, type, param, code: status } });
}

/** Registers vLLM's OpenAI-compatible and RLHF dev routes on the simulator. */
export function registerVllmRoutes(app: FastifyInstance, engine: SimEngine): void {
  const cfg = engine.cfg;
  const tok = engine.tokenizer;

  app.get('/v1/models', async () => ({
    object: 'list',
    data: [
      {
        id: cfg.model,
        object: 'model',
        created: Math.floor(Date.now() / 1000),
        owned_by: 'vllm',
        root: cfg.model,
        parent: null,
        max_model_len: cfg.max_model_len,
        permission: [],
      },
    ],
  }));

  app.post('/v1/completions', async (request, reply) => {
    const parsed = CompletionRequest.safeParse(request.body);
    if (!parsed.success) return vllmError(reply, 400, parsed.error.message);
    const body = parsed.data;
    if (body.stream) return vllmError(reply, 400, 'stream=true is not supported by the raas simulator; send stream=false', 'stream');
    const prompts: number[][] = normalisePrompts(body.prompt, (s) => tok.encode(s));
    const maxTokens = body.max_tokens ?? 16;
    for (const p of prompts) {
      if (p.length >= cfg.max_model_len) {
        return vllmError(
          reply,
          400,
          `This model's maximum context length is ${cfg.max_model_len} tokens. However, your request has ${p.length} input tokens. Please reduce the length of the input messages.`,
          'input_tokens',
        );
      }
      if (p.length + maxTokens > cfg.max_model_len) {
        return vllmError(
          reply,
          400,
          `'max_tokens' or 'max_completion_tokens' is too large: ${maxTokens}. This model's maximum context length is ${cfg.max_model_len} tokens and your request has ${p.length} input tokens (${maxTokens} > ${cfg.max_model_len} - ${p.length}). None`,
        );
      }
    }
    const id = body.request_id ?? (request.headers['x-request-id'] as string | undefined) ?? `cmpl-${randomBytes(8).toString('hex')}`;
    const n = body.n ?? 1;
    const gone = clientGone(reply);
    const jobs: Array<Promise<SimOutput>> = [];
    prompts.forEach((prompt, pi) => {
      for (let k = 0; k < n; k++) {
        const i = pi * n + k;
        jobs.push(
          engine.generate(
            {
              api: 'vllm',
              request_id: prompts.length * n > 1 ? `${id}-${i}` : id,
              prompt_ids: prompt,
              max_tokens: maxTokens,
              seed: body.seed == null ? undefined : n > 1 ? body.seed + k : body.seed,
              temperature: body.temperature ?? undefined,
              top_p: body.top_p ?? undefined,
              top_k: body.top_k ?? undefined,
              stop_token_ids: body.stop_token_ids ?? [],
              sampling: Object.fromEntries(LOGGED_VLLM.filter((k) => body[k] != null).map((k) => [k, body[k]])),
            },
            gone.signal,
          ),
        );
      }
    });
    try {
      const outs = await Promise.all(jobs);
      let promptTokens = 0;
      for (const p of prompts) promptTokens += p.length * n;
      const completionTokens = outs.reduce((a, o) => a + o.ids.length, 0);
      return {
        id,
        object: 'text_completion',
        created: Math.floor(Date.now() / 1000),
        model: body.model ?? cfg.model,
        choices: outs.map((o, i) => choice(engine, o, i, prompts[Math.floor(i / n)]!, body)),
        service_tier: null,
        system_fingerprint: null,
        usage: {
          prompt_tokens: promptTokens,
          total_tokens: promptTokens + completionTokens,
          completion_tokens: completionTokens,
          prompt_tokens_details: null,
        },
        kv_transfer_params: null,
      };
    } finally {
      gone.dispose();
    }
  });

  // Dev-mode /server_info: the engine config, where a client can read which logprobs the server returns.
  app.get('/server_info', async (request) => {
    const format = (request.query as { config_format?: string }).config_format ?? 'text';
    const modelConfig = { model: cfg.model, max_model_len: cfg.max_model_len, logprobs_mode: cfg.logprobs_mode };
    const vllmConfig =
      format === 'json'
        ? { model_config: modelConfig }
        : `model=${JSON.stringify(cfg.model)}, max_model_len=${cfg.max_model_len}, logprobs_mode=${cfg.logprobs_mode}`;
    return { vllm_config: vllmConfig, vllm_env: {}, system_env: {} };
  });

  // RLHF dev routes of newer vLLM (vllm/entrypoints/serve/dev/rlhf/api_router.py).
  app.post('/finish_weight_update', async (request) => {
    const body = (request.body ?? {}) as { weight_version?: unknown };
    const version = typeof body.weight_version === 'string' ? body.weight_version : undefined;
    const { aborted } = engine.updateWeights(version);
    return { message: 'Weight update finished', weight_version: engine.weightVersion, num_aborted_requests: aborted };
  });
  app.get('/weight_info', async () => ({ weight_version: engine.weightVersion, num_updates: engine.updates }));
  app.post('/abort_requests', async (request, reply) => {
    const body = (request.body ?? {}) as { request_ids?: unknown };
    if (!Array.isArray(body.request_ids)) return reply.code(400).send({ detail: 'request_ids must be a list of request ids' });
    let n = 0;
    for (const rid of body.request_ids) if (engine.abort(String(rid))) n++;
    return { status: 'ok', aborted: n };
  });
  app.post('/pause', async (request) => {
    const mode = (request.query as { mode?: string }).mode ?? 'abort';
    if (mode === 'abort') engine.abortAll('Abort: engine paused');
    return { status: 'paused' };
  });
  app.post('/resume', async () => ({ status: 'resumed' }));
  app.post('/reset_prefix_cache', async (_request, reply) => {
    engine.cache.clear();
    return reply.code(200).send('');
  });
}

function normalisePrompts(prompt: number[] | number[][] | string | string[], encode: (s: string) => number[]): number[][] {
  if (typeof prompt === 'string') return [encode(prompt)];
  if (prompt.length === 0) return [[]];
  if (typeof prompt[0] === 'number') return [prompt as number[]];
  if (typeof prompt[0] === 'string') return (prompt as string[]).map(encode);
  return prompt as number[][];
}

type Body = z.infer<typeof CompletionRequest>;

/** One choice exactly as vLLM's `request_output_to_completion_response` shapes it. */
function choice(engine: SimEngine, o: SimOutput, index: number, promptIds: number[], body: Body): Record<string, unknown> {
  const tok = engine.tokenizer;
  // The stopping token stays in token_ids and logprobs but leaves the text unless asked for.
  const textIds = o.finish === 'stop' && o.matched !== null && !body.include_stop_str_in_output ? o.ids.slice(0, -1) : o.ids;
  const text = tok.decode(textIds, { skipSpecial: body.skip_special_tokens ?? true });
  let logprobs: Record<string, unknown> | null = null;
  if (body.logprobs != null) {
    const asIds = body.return_tokens_as_token_ids ?? false;
    const name = (id: number): string => (asIds ? `token_id:${id}` : tok.decode([id]));
    const tokens = o.ids.map(name);
    const offsets: number[] = [];
    let off = 0;
    for (const t of tokens) {
      offsets.push(off);
      off += t.length;
    }
    const k = Math.max(0, body.logprobs);
    logprobs = {
      text_offset: offsets,
      token_logprobs: o.logprobs,
      tokens,
      top_logprobs: o.ids.map((id, i) => {
        const top: Record<string, number> = { [name(id)]: o.logprobs[i]! };
        // Alternatives are the simulated distribution's tail tokens (other real ids); past the tail, or
        // filtered out by top-k/top-p in processed mode, a token has probability 0 (vLLM's -9999 clamp).
        const tail = o.tail[i]!;
        for (let j = 1; j <= k && j < 20; j++) top[name((id + j * 7919) % 151643)] = j <= tail.count ? tail.logprob : -9999;
        return top;
      }),
    };
  }
  const returnIds = body.return_token_ids ?? false;
  return {
    index,
    text,
    logprobs,
    finish_reason: o.finish,
    stop_reason: o.finish === 'stop' && o.matched !== null && o.matched !== tok.eosId ? o.matched : null,
    token_ids: returnIds ? o.ids : null,
    prompt_logprobs: null,
    prompt_token_ids: returnIds ? promptIds : null,
  };
}
