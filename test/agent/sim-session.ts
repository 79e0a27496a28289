import { ContextLengthError } from '../../src/protocol/errors.js';
import type { GenerateRequest, GenerateResult, LlmSession } from '../../src/server/llm/types.js';
import { seedOf } from '../../src/util/hash.js';
import type { SimHandle } from '../../src/sim/index.js';

/**
 * A minimal LlmSession over a real simulated backend's HTTP API (vLLM or SGLang wire format), so
 * the agent loop is tested against a real server. The rollout server's own session lives in
 * src/server/llm; this one only does what the agent needs: seeds per call, parses both formats.
 */
export class SimSession implements LlmSession {
  readonly turns: Array<{ backend: string; weight_version: string }> = [];
  private calls = 0;

  constructor(
    private readonly url: string,
    private readonly api: 'vllm' | 'sglang' = 'vllm',
    private readonly seed = 0,
    /** Request ids are `<prefix>-<call>` so a test can find this session's calls in the sim's log. */
    private readonly ridPrefix?: string,
  ) {}

  get backend(): string {
    return this.url;
  }

  async maxModelLen(signal?: AbortSignal): Promise<number | undefined> {
    const r = await fetch(`${this.url}/v1/models`, { signal });
    const j = (await r.json()) as { data: Array<{ max_model_len?: number }> };
    return j.data[0]?.max_model_len;
  }

  async generate(req: GenerateRequest): Promise<GenerateResult> {
    const call = this.calls++;
    const seed = seedOf(this.seed, call);
    const rid = this.ridPrefix === undefined ? undefined : `${this.ridPrefix}-${call}`;
    // vLLM's answer carries no weight version: ask the backend first (the server's pool knows it from registration).
    const version = this.api === 'vllm' ? await this.weightVersion(req.signal) : '';
    const body =
      this.api === 'vllm'
        ? {
            model: 'm',
            prompt: req.prompt_ids,
            max_tokens: req.max_tokens,
            seed,
            logprobs: 0,
            return_token_ids: true,
            return_tokens_as_token_ids: true,
            skip_special_tokens: false,
            stop_token_ids: req.stop_token_ids ?? [],
            request_id: rid,
          }
        : {
            rid,
            input_ids: req.prompt_ids,
            sampling_params: {
              max_new_tokens: req.max_tokens,
              stop_token_ids: req.stop_token_ids ?? [],
              skip_special_tokens: false,
              no_stop_trim: true,
              sampling_seed: seed,
            },
            return_logprob: true,
          };
    const r = await fetch(`${this.url}${this.api === 'vllm' ? '/v1/completions' : '/generate'}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: req.signal,
    });
    const j = (await r.json()) as any;
    if (
      r.status === 400 &&
      /maximum context length|context length is only|maximum model length|longer than the model's context length/.test(
        j.error?.message ?? '',
      )
    ) {
      throw new ContextLengthError(j.error.message);
    }
    if (r.status !== 200) throw new Error(`sim answered ${r.status}: ${JSON.stringify(j)}`);
    if (this.api === 'vllm') {
      this.turns.push({ backend: this.url, weight_version: version });
      const c = j.choices[0];
      return {
        ids: c.token_ids,
        logprobs: c.logprobs.token_logprobs,
        finish_reason: c.finish_reason,
        weight_version: version,
        backend: this.url,
      };
    }
    const m = j.meta_info;
    this.turns.push({ backend: this.url, weight_version: m.weight_version });
    return {
      ids: j.output_ids,
      logprobs: m.output_token_logprobs.map((t: [number]) => t[0]),
      finish_reason: m.finish_reason.type,
      weight_version: m.weight_version,
      backend: this.url,
    };
  }

  private async weightVersion(signal?: AbortSignal): Promise<string> {
    const r = await fetch(`${this.url}/get_weight_version`, { signal });
    return ((await r.json()) as { weight_version: string }).weight_version;
  }
}

/**
 * The same session without HTTP: calls the simulator's engine in-process (SimHandle.generate), for
 * sweeps of thousands of trajectories where the wire format is already covered by SimSession tests.
 */
export class InProcessSimSession implements LlmSession {
  readonly turns: Array<{ backend: string; weight_version: string }> = [];
  private calls = 0;

  constructor(
    private readonly sim: SimHandle,
    private readonly seed: number,
    private readonly ridPrefix: string,
  ) {}

  get backend(): string {
    return this.sim.url;
  }

  async maxModelLen(): Promise<number> {
    return this.sim.config.max_model_len;
  }

  async generate(req: GenerateRequest): Promise<GenerateResult> {
    const call = this.calls++;
    const o = await this.sim.generate(
      {
        api: 'sglang',
        request_id: `${this.ridPrefix}-${call}`,
        prompt_ids: req.prompt_ids,
        max_tokens: req.max_tokens,
        seed: seedOf(this.seed, call),
        stop_token_ids: req.stop_token_ids ?? [],
      },
      req.signal,
    );
    this.turns.push({ backend: this.sim.url, weight_version: o.weight_version });
    return { ids: o.ids, logprobs: o.logprobs, finish_reason: o.finish, weight_version: o.weight_version, backend: this.sim.url };
  }
}
