import { RaasError } from '../../protocol/errors.js';
import { wireSampling } from '../../protocol/llm.js';
import type { BackendClient, BackendFinish, GenerateRequest } from './types.js';
import { getJson, normalizeAddress, postJson, probe } from './http.js';
import { BackendMetadata, type MetadataOptions } from './metadata.js';

/** Options shared by the vLLM and SGLang clients. */
export interface ClientOptions {
  /** vLLM `model`; when unset, the first id of /v1/models (or none). */
  model?: string;
  /** Deadline of a call that names none (`llm.request_timeout_s`). */
  requestTimeoutMs?: number;
  /** Deadline and retry backoff of the metadata fetch. */
  metadata?: MetadataOptions;
}

type ClientRequest = GenerateRequest & { seed: number; sampling: Record<string, unknown>; request_id: string };

/** Parses vLLM's `"token_id:N"` placeholders (return_tokens_as_token_ids). */
export function parseTokenIdPlaceholder(token: string): number {
  const m = /^token_id:(\d+)$/.exec(token);
  if (!m)
    throw new RaasError(
      'backend_unavailable',
      `vLLM returned token ${JSON.stringify(token)} instead of "token_id:N": is return_tokens_as_token_ids supported?`,
      { retryable: false },
    );
  return Number(m[1]);
}

/** Maps vLLM finish reasons: `repetition` is a normal stop; `error` fails the call. */
function finishOf(reason: unknown): BackendFinish {
  if (reason === 'length') return 'length';
  if (reason === 'abort') return 'abort';
  if (reason === 'error') throw new RaasError('backend_unavailable', 'vLLM finished the request with "error"', { retryable: true });
  return 'stop';
}

/** Token-in/token-out client of vLLM `POST /v1/completions` (wire-formats.md section 2). */
export class VllmClient implements BackendClient {
  readonly api = 'vllm' as const;
  readonly address: string;
  private readonly models: BackendMetadata<{ id?: string; maxModelLen?: number }>;
  private readonly timeoutMs: number;

  constructor(
    address: string,
    private readonly opts: ClientOptions = {},
  ) {
    this.address = normalizeAddress(address);
    this.timeoutMs = opts.requestTimeoutMs ?? 3_600_000;
    this.models = new BackendMetadata(async (signal) => {
      const r = await getJson(`${this.address}/v1/models`, signal, 10_000);
      const m = r?.data?.[0];
      return {
        id: typeof m?.id === 'string' ? m.id : undefined,
        maxModelLen: typeof m?.max_model_len === 'number' ? m.max_model_len : undefined,
      };
    }, opts.metadata);
  }

  async generate(req: ClientRequest): Promise<{ ids: number[]; logprobs: number[]; finish_reason: BackendFinish }> {
    const model = this.opts.model ?? (await this.models.get(req.signal))?.id;
    const s = req.sampling;
    // extra_body first, then the forwarded parameters, then what raas sets (never overridden).
    const { fields, extra } = wireSampling('vllm', s, req.max_tokens);
    const body: Record<string, unknown> = {
      ...extra,
      ...fields,
      ...(model === undefined ? {} : { model }),
      prompt: req.prompt_ids,
      max_tokens: req.max_tokens,
      temperature: s.temperature ?? 1.0,
      top_p: s.top_p ?? 1.0,
      ...(s.top_k === undefined ? {} : { top_k: s.top_k }),
      n: 1,
      seed: req.seed,
      logprobs: 0,
      return_tokens_as_token_ids: true,
      return_token_ids: true,
      skip_special_tokens: false,
      include_stop_str_in_output: false,
      stop: fields.stop ?? [],
      stop_token_ids: req.stop_token_ids ?? [],
      // Names the call for /abort_requests (a pause in abort mode).
      request_id: req.request_id,
    };
    const res = await postJson(`${this.address}/v1/completions`, body, req.signal, req.timeout_ms ?? this.timeoutMs);
    const choice = res?.choices?.[0];
    if (!choice) throw new RaasError('backend_unavailable', `vLLM ${this.address} answered without choices`, { retryable: true });
    const lp = choice.logprobs as { tokens?: string[]; token_logprobs?: Array<number | null> } | null | undefined;
    // token_ids (return_token_ids) is the authoritative list; older releases only have the placeholders.
    const ids: number[] = Array.isArray(choice.token_ids) ? choice.token_ids : (lp?.tokens ?? []).map(parseTokenIdPlaceholder);
    const logprobs = ids.map((_, i) => lp?.token_logprobs?.[i] ?? 0);
    return { ids, logprobs, finish_reason: finishOf(choice.finish_reason) };
  }

  /** From GET /v1/models; undefined while unknown (a failed fetch is retried after a backoff, never kept). */
  async maxModelLen(signal?: AbortSignal): Promise<number | undefined> {
    return (await this.models.get(signal))?.maxModelLen;
  }

  /** GET /health (vLLM answers 200 while its engine lives); an answer also refetches metadata still unknown. */
  async probe(timeoutMs: number): Promise<void> {
    await probe(`${this.address}/health`, timeoutMs);
    this.models.refresh();
  }
}
