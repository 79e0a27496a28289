import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { SimEngine, SimOutput } from './engine.js';
import { clientGone } from './http-util.js';

const SamplingParams = z.looseObject({
  max_new_tokens: z.number().int().min(0).nullish(),
  temperature: z.number().min(0).nullish(),
  stop_token_ids: z.array(z.number().int()).nullish(),
  skip_special_tokens: z.boolean().nullish(),
  no_stop_trim: z.boolean().nullish(),
  sampling_seed: z.number().int().nullish(),
  // The other fields of SGLang's SamplingParams (python/sglang/srt/sampling/sampling_params.py@0bebedd:31-56),
  // with verify()'s ranges (:92-118): accepted and recorded in the request log, not modelled.
  top_p: z.number().gt(0).max(1).nullish(),
  top_k: z.number().int().nullish(),
  min_p: z.number().min(0).max(1).nullish(),
  frequency_penalty: z.number().min(-2).max(2).nullish(),
  presence_penalty: z.number().min(-2).max(2).nullish(),
  repetition_penalty: z.number().min(0).max(2).nullish(),
  min_new_tokens: z.number().int().min(0).nullish(),
  ignore_eos: z.boolean().nullish(),
  stop: z.union([z.string(), z.array(z.string())]).nullish(),
  logit_bias: z.record(z.string(), z.number()).nullish(),
  json_schema: z.string().nullish(),
  regex: z.string().nullish(),
  ebnf: z.string().nullish(),
  custom_params: z.record(z.string(), z.unknown()).nullish(),
});

const LOGGED_SGLANG = [
  'min_p',
  'frequency_penalty',
  'presence_penalty',
  'repetition_penalty',
  'min_new_tokens',
  'ignore_eos',
  'stop',
  'logit_bias',
  'json_schema',
  'regex',
  'ebnf',
  'custom_params',
] as const;

/** SGLang's `GenerateReqInput`, the fields the simulator honours (one request; batches are not simulated). */
const GenerateRequest = z.looseObject({
  input_ids: z.array(z.number().int().nonnegative()).optional(),
  text: z.string().optional(),
  sampling_params: SamplingParams.nullish(),
  return_logprob: z.boolean().nullish(),
  top_logprobs_num: z.number().int().min(0).nullish(),
  return_text_in_logprobs: z.boolean().nullish(),
  rid: z.string().nullish(),
  stream: z.boolean().nullish(),
});

/** SGLang's `finish_reason` object for each way a request ends. */
function finishReason(o: SimOutput): Record<string, unknown> {
  if (o.finish === 'stop') return { type: 'stop', matched: o.matched };
  if (o.finish === 'length') return { type: 'length', length: o.ids.length };
  return { type: 'abort', message: o.abort_message ?? 'Abort request', status_code: null, err_type: null };
}

/** Registers SGLang's native routes (`/generate` and the control endpoints) on the simulator. */
export function registerSglangRoutes(app: FastifyInstance, engine: SimEngine): void {
  const cfg = engine.cfg;
  const tok = engine.tokenizer;
  const badRequest = (message: string): Record<string, unknown> => ({
    object: 'error',
    message,
    type: 'Bad Request',
    param: null,
    code: 400,
  });

  app.post('/generate', async (request, reply) => {
    const parsed = GenerateRequest.safeParse(request.body);
    if (!parsed.success) return reply.code(400).send(badRequest(parsed.error.message));
    const body = parsed.data;
    if (body.stream) return reply.code(400).send(badRequest('stream=true is not supported by the raas simulator; send stream=false'));
    if (body.input_ids === undefined && body.text === undefined)
      return reply.code(400).send(badRequest('Either text or input_ids should be provided.'));
    const inputIds = body.input_ids ?? tok.encode(body.text!);
    const sp = body.sampling_params ?? {};
    const maxNew = sp.max_new_tokens ?? 128;
    // SamplingParams.verify (sampling_params.py@0bebedd:119-131).
    if ((sp.min_new_tokens ?? 0) > maxNew)
      return reply.code(400).send(badRequest(`min_new_tokens must be in [0, max_new_tokens(${maxNew})], got ${sp.min_new_tokens}.`));
    if (inputIds.length >= cfg.max_model_len) {
      return reply.code(400).send({
        error: {
          message: `The input (${inputIds.length} tokens) is longer than the model's context length (${cfg.max_model_len} tokens).`,
        },
      });
    }
    if (inputIds.length + maxNew > cfg.max_model_len) {
      return reply.code(400).send({
        error: {
          message: `Requested token count exceeds the model's maximum context length of ${cfg.max_model_len} tokens. You requested a total of ${inputIds.length + maxNew} tokens: ${inputIds.length} tokens from the input messages and ${maxNew} tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.`,
        },
      });
    }
    const rid = body.rid ?? randomBytes(16).toString('hex');
    const started = performance.now();
    const gone = clientGone(reply);
    try {
      const o = await engine.generate(
        {
          api: 'sglang',
          request_id: rid,
          prompt_ids: inputIds,
          max_tokens: maxNew,
          seed: sp.sampling_seed ?? undefined,
          temperature: sp.temperature ?? undefined,
          stop_token_ids: sp.stop_token_ids ?? [],
          sampling: Object.fromEntries(LOGGED_SGLANG.filter((k) => sp[k] != null).map((k) => [k, sp[k]])),
        },
        gone.signal,
      );
      // SGLang trims the matched stop token from the text (not from output_ids) unless no_stop_trim.
      const textIds = o.finish === 'stop' && !sp.no_stop_trim ? o.ids.slice(0, -1) : o.ids;
      const withText = body.return_text_in_logprobs ?? false;
      const meta: Record<string, unknown> = {
        id: rid,
        finish_reason: finishReason(o),
        prompt_tokens: inputIds.length,
        weight_version: o.weight_version,
        completion_tokens: o.ids.length,
        cached_tokens: o.cached_tokens,
        e2e_latency: (performance.now() - started) / 1000,
      };
      if (body.return_logprob) {
        meta.input_token_logprobs = [];
        meta.output_token_logprobs = o.ids.map((id, i) => [o.logprobs[i], id, withText ? tok.decode([id]) : null]);
        if (body.top_logprobs_num)
          meta.output_top_logprobs = o.ids.map((id, i) => [[o.logprobs[i], id, withText ? tok.decode([id]) : null]]);
      }
      return { text: tok.decode(textIds, { skipSpecial: sp.skip_special_tokens ?? true }), output_ids: o.ids, meta_info: meta };
    } finally {
      gone.dispose();
    }
  });

  app.post('/abort_request', async (request, reply) => {
    const body = (request.body ?? {}) as { rid?: unknown; abort_all?: unknown };
    if (body.abort_all === true) engine.abortAll();
    else if (typeof body.rid === 'string') engine.abort(body.rid);
    return reply.code(200).send('');
  });

  const update = (version: string | undefined): Record<string, unknown> => {
    const { aborted } = engine.updateWeights(version);
    return { success: true, message: 'Succeeded to update model weights.', num_paused_requests: aborted };
  };
  app.post('/update_weights_from_disk', async (request, reply) => {
    const body = (request.body ?? {}) as { model_path?: unknown; weight_version?: unknown };
    if (typeof body.model_path !== 'string' || body.model_path === '') {
      return reply
        .code(400)
        .send({ success: false, message: 'model_path is required: the checkpoint directory to load', num_paused_requests: 0 });
    }
    return update(typeof body.weight_version === 'string' ? body.weight_version : undefined);
  });
  app.post('/update_weight_version', async (request) => {
    const body = (request.body ?? {}) as { new_version?: unknown };
    engine.weightVersion = typeof body.new_version === 'string' ? body.new_version : engine.weightVersion;
    return { success: true, message: 'Weight version updated', new_version: engine.weightVersion };
  });
  app.get('/get_weight_version', async () => ({ weight_version: engine.weightVersion }));
  app.get('/get_model_info', async () => ({
    model_path: cfg.model,
    tokenizer_path: cfg.model,
    is_generation: true,
    weight_version: engine.weightVersion,
  }));
  app.get('/get_server_info', async () => ({
    model_path: cfg.model,
    context_length: cfg.max_model_len,
    weight_version: engine.weightVersion,
    version: 'raas-sim',
    internal_states: [{ num_running_reqs: engine.running, num_waiting_reqs: engine.waiting }],
  }));
  const flush = async (_req: unknown, reply: import('fastify').FastifyReply): Promise<unknown> => {
    if (engine.inFlightCount > 0) return reply.code(400).send('Cache not flushed. Please check the server status.\n');
    engine.cache.clear();
    return reply.code(200).send('Cache flushed.\n');
  };
  app.post('/flush_cache', flush);
  app.get('/flush_cache', flush);
  app.get('/health_generate', async (_request, reply) => reply.code(200).send(''));
}
