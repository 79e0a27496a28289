import type { LlmApi } from '../../protocol/llm.js';

/** One call to the model, token ids in and out. */
export interface GenerateRequest {
  prompt_ids: number[];
  max_tokens: number;
  stop_token_ids?: number[];
  signal?: AbortSignal;
  /** Deadline of this one call; the client's `requestTimeoutMs` when absent. */
  timeout_ms?: number;
}

/** vLLM/SGLang finish reasons, normalised. `abort` is a turn the backend cut (e.g. a weight update). */
export type BackendFinish = 'stop' | 'length' | 'abort';

export interface GenerateResult {
  /** Generated ids, unchanged (including the final `<|im_end|>`). */
  ids: number[];
  /** One logprob per generated id. */
  logprobs: number[];
  finish_reason: BackendFinish;
  /** The backend's weight version when the call started. */
  weight_version: string;
  /** Address of the backend that answered. */
  backend: string;
}

/**
 * The job's handle on the LLM pool, bound to one backend (except under round_robin routing) and to
 * the job's seed. Records each call's backend and weight version.
 */
export interface LlmSession {
  generate(req: GenerateRequest): Promise<GenerateResult>;
  /** Context window: sampling_params.max_model_len, else the backend's /v1/models, else undefined. */
  maxModelLen(signal?: AbortSignal): Promise<number | undefined>;
  /** Address of the backend currently bound (null before the first call under round_robin). */
  readonly backend: string | null;
  /** Per call: which backend answered and its weight version when the call started. */
  readonly turns: ReadonlyArray<{ backend: string; weight_version: string }>;
}

/** A token-in/token-out client of one backend address (vLLM or SGLang). */
export interface BackendClient {
  readonly address: string;
  readonly api: LlmApi;
  generate(
    req: GenerateRequest & { seed: number; sampling: Record<string, unknown>; request_id: string },
  ): Promise<Omit<GenerateResult, 'weight_version' | 'backend'>>;
  maxModelLen(signal?: AbortSignal): Promise<number | undefined>;
  /** A cheap liveness check (GET /health): resolves when the backend answers below 500. Without it the pool cannot probe. */
  probe?(timeoutMs: number): Promise<void>;
}
