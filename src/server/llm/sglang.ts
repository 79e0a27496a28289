import { RaasError } from '../../protocol/errors.js';
import { wireSampling } from '../../protocol/llm.js';
import type { BackendClient, BackendFinish, GenerateRequest } from './types.js';
import { getJson, normalizeAddress, postJson, probe } from './http.js';
import { BackendMetadata } from './metadata.js';
import type { ClientOptions } from './vllm.js';

type ClientRequest = GenerateRequest & { seed: number; sampling: Record<string, unknown>; request_id: string };

function finishOf(reason: { type?: string } | null | undefined): BackendFinish {
  if (reason?.type === 'length') return 'length';
  if (reason?.type === 'abort') return 'abort';
  return 'stop';
}

/** Token-in/token-out client of SGLang's native `POST /generate` (wire-formats.md section 6). */
export class SglangClient implements BackendClient {
  readonly api = 'sglang' as const;
  readonly address: string;
  private readonly info: BackendMetadata<number | undefined>;
  private readonly timeoutMs: number;

  constructor(address: string, opts: ClientOptions = {}) {
    this.address = normalizeAddress(address);
    this.timeoutMs = opts.requestTimeoutMs ?? 3_600_000;
    this.info = new BackendMetadata(async (signal) => {
      const r = await getJson(`${this.address}/get_server_info`, signal, 10_000);
      return typeof r?.context_length === 'number'
        ? r.context_length
        : typeof r?.max_req_input_len === 'number'
          ? r.max_req_input_len
          : undefined;
    }, opts.metadata);
  }

  async generate(req: ClientRequest): Promise<{ ids: number[]; logprobs: number[]; finish_reason: BackendFinish }> {
    const s = req.sampling;
    // extra_body first (its sampling_params into ours), then the forwarded parameters, then what raas sets.
    const { fields, extra } = wireSampling('sglang', s, req.max_tokens);
    const extraSampling = typeof extra.sampling_params === 'object' && extra.sampling_params !== null ? extra.sampling_params : {};
    const body = {
      ...extra,
      input_ids: req.prompt_ids,
      sampling_params: {
        ...extraSampling,
        ...fields,
        max_new_tokens: req.max_tokens,
        temperature: s.temperature ?? 1.0,
        top_p: s.top_p ?? 1.0,
        top_k: s.top_k ?? -1,
        stop_token_ids: req.stop_token_ids ?? [],
        skip_special_tokens: false,
        no_stop_trim: true,
        sampling_seed: req.seed,
      },
      return_logprob: true,
      logprob_start_len: -1,
      top_logprobs_num: 0,
      return_text_in_logprobs: false,
      rid: req.request_id,
      stream: false,
    };
    const res = await postJson(`${this.address}/generate`, body, req.signal, req.timeout_ms ?? this.timeoutMs);
    if (!res || !Array.isArray(res.output_ids))
      throw new RaasError('backend_unavailable', `SGLang ${this.address} answered without output_ids`, { retryable: true });
    const ids: number[] = res.output_ids;
    const tuples: Array<[number | null, number, unknown]> = res.meta_info?.output_token_logprobs ?? [];
    const logprobs = ids.map((_, i) => tuples[i]?.[0] ?? 0);
    return { ids, logprobs, finish_reason: finishOf(res.meta_info?.finish_reason) };
  }

  /** From /get_server_info (`context_length`, else `max_req_input_len`); undefined while unknown (a failure is retried later). */
  maxModelLen(signal?: AbortSignal): Promise<number | undefined> {
    return this.info.get(signal);
  }

  /** GET /health; an answer also refetches the server info still unknown. */
  async probe(timeoutMs: number): Promise<void> {
    await probe(`${this.address}/health`, timeoutMs);
    this.info.refresh();
  }
}
