import { z } from 'zod';
import { RaasError } from './errors.js';

export const LlmApi = z.enum(['vllm', 'sglang']);
export type LlmApi = z.infer<typeof LlmApi>;

/**
 * Why `address` cannot be a backend address (undefined when it can): it must be an http(s) URL with
 * a host, or `host:port` (`http://` is added); ProRL's `/v1` suffix is fine.
 */
export function addressProblem(address: string): string | undefined {
  const a = address.trim();
  const fix = 'give http://host:port (e.g. http://127.0.0.1:8000/v1)';
  if (/\s/.test(a)) return `${JSON.stringify(address)} is not a URL (it contains spaces): ${fix}`;
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(a) ? a : `http://${a}`;
  let u: URL;
  try {
    u = new URL(withScheme);
  } catch {
    return `${JSON.stringify(address)} is not a URL: ${fix}`;
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    return `${JSON.stringify(address)}: scheme ${u.protocol.slice(0, -1)} is not served; ${fix}`;
  if (!u.hostname) return `${JSON.stringify(address)} has no host: ${fix}`;
  if (u.search || u.hash || u.username) return `${JSON.stringify(address)}: no query, fragment or credentials in a backend address; ${fix}`;
  return undefined;
}

/** A backend address in a config file: checked as /add_llm_server checks it. */
export const BackendAddress = z
  .string()
  .min(1)
  .max(2048)
  .superRefine((v, ctx) => {
    const why = addressProblem(v);
    if (why) ctx.addIssue({ code: 'custom', message: why });
  });

/** POST /add_llm_server body. ProRL's `http://host:port/v1` addresses are vLLM. The address is checked by the route (code invalid_address). */
export const AddLlmServerRequest = z.strictObject({
  address: z.string().min(1).max(2048),
  api: LlmApi.optional(),
  weight_version: z.string().max(256).optional(),
  /** Ask the backend once for its model (default true); the answer says what it found. */
  probe: z.boolean().optional(),
  /** Admin token of a multi-tenant server: the tenant whose pool it joins (a tenant's token names its own). */
  tenant: z.string().min(1).max(64).optional(),
});

/** What the one probe of POST /add_llm_server found. */
export const BackendProbe = z.object({
  answered: z.boolean(),
  /** vLLM: /v1/models' first id; SGLang: /get_model_info's model_path. */
  model: z.string().optional(),
  /** vLLM: /v1/models' max_model_len; SGLang: /get_server_info's context_length. */
  max_model_len: z.number().int().optional(),
  /** Set when the backend did not answer (it stays registered: health probes take over) or answered oddly. */
  warning: z.string().optional(),
});
export type BackendProbe = z.infer<typeof BackendProbe>;
export type AddLlmServerRequest = z.infer<typeof AddLlmServerRequest>;

export const RemoveLlmServerRequest = z.strictObject({
  address: z.string().min(1).max(2048),
  tenant: z.string().min(1).max(64).optional(),
});

/** POST /clear_llm_server body (optional): the admin of a multi-tenant server names the tenant. */
export const ClearLlmServerRequest = z.strictObject({ tenant: z.string().min(1).max(64).optional() });

/** A backend as /status and the llm routes report it. */
export const BackendInfo = z.object({
  address: z.string(),
  api: LlmApi,
  weight_version: z.string(),
  active: z.number().int(),
  assigned: z.number().int(),
  healthy: z.boolean().optional(),
  /** Multi-tenant servers: the tenant it belongs to (its jobs alone use it). */
  tenant: z.string().optional(),
});
export type BackendInfo = z.infer<typeof BackendInfo>;

export const LlmServersResponse = z.object({ status: z.string(), backends: z.array(BackendInfo) });
export type LlmServersResponse = z.infer<typeof LlmServersResponse>;

/**
 * Sampling parameters raas forwards to the backends besides temperature, top_p, top_k, seed and
 * stop_token_ids (SamplingParams in process.ts spreads these). Ranges are the backends' own:
 * vLLM `SamplingParams._verify_args` (vllm/sampling_params.py@db57383) and SGLang
 * `SamplingParams.verify` (python/sglang/srt/sampling/sampling_params.py@0bebedd:92-118); the
 * wire names are vLLM's `CompletionRequest` (vllm/entrypoints/openai/protocol.py@ec3b890, the
 * completion-sampling-params block) and SGLang's `SamplingParams.__init__` (sampling_params.py@0bebedd:31-56).
 */
export const FORWARDED_SAMPLING = {
  min_p: z.number().min(0).max(1).optional(),
  presence_penalty: z.number().min(-2).max(2).optional(),
  frequency_penalty: z.number().min(-2).max(2).optional(),
  repetition_penalty: z.number().gt(0).max(2).optional(),
  /** vLLM `min_tokens`, SGLang `min_new_tokens`. */
  min_tokens: z.number().int().nonnegative().optional(),
  ignore_eos: z.boolean().optional(),
  /** Stop strings (token ids: stop_token_ids). */
  stop: z.union([z.string().min(1), z.array(z.string().min(1))]).optional(),
  /** Token id (as a string, as in JSON) → bias added to its logit. */
  logit_bias: z.record(z.string().regex(/^\d+$/, 'keys are token ids, e.g. "151645"'), z.number().min(-100).max(100)).optional(),
  /** vLLM only. */
  allowed_token_ids: z.array(z.number().int().nonnegative()).min(1).optional(),
  /** Constrained decoding: vLLM `structured_outputs.regex`, SGLang `regex`. */
  regex: z.string().min(1).optional(),
  /** vLLM `structured_outputs.json`, SGLang `json_schema` (sent as a string). */
  json_schema: z.union([z.string().min(1), z.record(z.string(), z.unknown())]).optional(),
  /** vLLM `structured_outputs.grammar`, SGLang `ebnf`. */
  ebnf: z.string().min(1).optional(),
  /** SGLang only: handed to custom logit processors. */
  custom_params: z.record(z.string(), z.unknown()).optional(),
  /**
   * Pass-through for anything else the backend accepts: merged into vLLM's /v1/completions body, or
   * SGLang's /generate body (its `sampling_params` key into the sampling_params raas sends).
   * Fields raas sets itself cannot be overridden.
   */
  extra_body: z
    .record(z.string(), z.unknown())
    .superRefine((v, ctx) => {
      for (const k of Object.keys(v))
        if (RAAS_OWNED.has(k)) ctx.addIssue({ code: 'custom', path: [k], message: `raas sets "${k}" itself; it cannot be passed through` });
    })
    .optional(),
} as const;
type ForwardedSampling = { [K in keyof typeof FORWARDED_SAMPLING]?: z.infer<(typeof FORWARDED_SAMPLING)[K]> };

/** Body fields raas sets on every call (token-in/token-out needs them). */
const RAAS_OWNED = new Set([
  'model',
  'prompt',
  'input_ids',
  'text',
  'max_tokens',
  'max_new_tokens',
  'n',
  'best_of',
  'seed',
  'sampling_seed',
  'logprobs',
  'return_logprob',
  'logprob_start_len',
  'top_logprobs_num',
  'return_text_in_logprobs',
  'return_tokens_as_token_ids',
  'return_token_ids',
  'skip_special_tokens',
  'include_stop_str_in_output',
  'no_stop_trim',
  'stop_token_ids',
  'request_id',
  'rid',
  'stream',
  'echo',
]);

/** Why a key that vLLM or SGLang knows is not a raas sampling parameter (shown instead of "unknown key"). */
export const SAMPLING_HINTS: Readonly<Record<string, string>> = {
  n: "raas asks for one sample per call; the group size is the training config's `n`",
  best_of: 'raas asks for one sample per call; not settable',
  max_tokens: 'raas sets it per call; use `max_tokens_per_turn` (one call) or `max_response_tokens` (the whole trajectory)',
  max_new_tokens: 'raas sets it per call; use `max_tokens_per_turn` (one call) or `max_response_tokens` (the whole trajectory)',
  min_new_tokens: 'write `min_tokens` (raas sends it to SGLang as min_new_tokens)',
  sampling_seed: 'write `seed` (raas sends it to SGLang as sampling_seed, one per turn)',
  logprobs: "raas always asks for the sampled tokens' logprobs; not settable",
  top_logprobs: "raas always asks for the sampled tokens' logprobs; not settable",
  prompt_logprobs: 'prompt logprobs are not collected; not settable',
  use_beam_search: 'beam search gives no sampled-token logprobs; not supported',
  length_penalty: 'beam search gives no sampled-token logprobs; not supported',
  ...Object.fromEntries(
    [
      'skip_special_tokens',
      'spaces_between_special_tokens',
      'include_stop_str_in_output',
      'no_stop_trim',
      'return_tokens_as_token_ids',
      'return_token_ids',
      'detokenize',
      'echo',
      'stream',
      'truncate_prompt_tokens',
    ].map((k) => [k, 'raas sets it on every call (token-in/token-out needs it); not settable']),
  ),
};

/** Which backends take a forwarded parameter, and under which wire name. */
const WIRE: Record<Exclude<keyof ForwardedSampling, 'extra_body'>, { vllm: string | null; sglang: string | null }> = {
  min_p: { vllm: 'min_p', sglang: 'min_p' },
  presence_penalty: { vllm: 'presence_penalty', sglang: 'presence_penalty' },
  frequency_penalty: { vllm: 'frequency_penalty', sglang: 'frequency_penalty' },
  repetition_penalty: { vllm: 'repetition_penalty', sglang: 'repetition_penalty' },
  min_tokens: { vllm: 'min_tokens', sglang: 'min_new_tokens' },
  ignore_eos: { vllm: 'ignore_eos', sglang: 'ignore_eos' },
  stop: { vllm: 'stop', sglang: 'stop' },
  logit_bias: { vllm: 'logit_bias', sglang: 'logit_bias' },
  allowed_token_ids: { vllm: 'allowed_token_ids', sglang: null },
  regex: { vllm: 'structured_outputs.regex', sglang: 'regex' },
  json_schema: { vllm: 'structured_outputs.json', sglang: 'json_schema' },
  ebnf: { vllm: 'structured_outputs.grammar', sglang: 'ebnf' },
  custom_params: { vllm: null, sglang: 'custom_params' },
};
const API_NAME: Record<LlmApi, string> = { vllm: 'vLLM', sglang: 'SGLang' };

/** One message per sampling parameter that `api` does not take (empty when every one is supported). */
export function unsupportedSampling(api: LlmApi, sampling: Record<string, unknown>): string[] {
  const out: string[] = [];
  for (const [k, w] of Object.entries(WIRE)) {
    if (sampling[k] === undefined || w[api] !== null) continue;
    const other = api === 'vllm' ? 'sglang' : 'vllm';
    out.push(
      `\`sampling_params.${k}\`: ${API_NAME[api]} does not support it (${API_NAME[other]} only); remove it, or use ${other} backends`,
    );
  }
  return out;
}

/**
 * The forwarded sampling parameters as `api` takes them: vLLM's /v1/completions body fields, or
 * SGLang's `sampling_params` fields, plus `extra_body`. A parameter the backend does not support throws.
 * `min_tokens` is capped at the call's `maxTokens`.
 */
export function wireSampling(
  api: LlmApi,
  sampling: Record<string, unknown>,
  maxTokens?: number,
): { fields: Record<string, unknown>; extra: Record<string, unknown> } {
  const bad = unsupportedSampling(api, sampling);
  if (bad.length) throw new RaasError('bad_request', bad.join('; '), { retryable: false });
  const fields: Record<string, unknown> = {};
  for (const [k, w] of Object.entries(WIRE)) {
    let v = sampling[k];
    const name = w[api];
    if (v === undefined || name === null) continue;
    if (name.startsWith('structured_outputs.')) {
      fields.structured_outputs = { ...(fields.structured_outputs as object), [name.slice(19)]: v };
      continue;
    }
    if (api === 'sglang' && k === 'json_schema' && typeof v !== 'string') v = JSON.stringify(v);
    // Both backends refuse min_tokens > max_tokens; a turn's max_tokens is what is left of the budget.
    if (k === 'min_tokens' && maxTokens !== undefined) v = Math.min(v as number, maxTokens);
    fields[name] = v;
  }
  const extra = sampling.extra_body;
  return { fields, extra: typeof extra === 'object' && extra !== null ? (extra as Record<string, unknown>) : {} };
}
