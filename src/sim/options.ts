import { z } from 'zod';
import { LOGPROBS_MODES } from './logprobs.js';
import { SimDifficulty } from './difficulty.js';

/**
 * Latency model of the simulated backend. Every term is zero by default, so unit tests run at
 * HTTP speed; benchmarks set realistic values (see `REALISTIC_LATENCY`).
 */
export const SimLatency = z
  .strictObject({
    /** Milliseconds per prompt token that misses the prefix cache; a backend prefills one request at a time. */
    prefill_ms_per_token: z.number().nonnegative().default(0),
    /** Milliseconds per generated token for a request running alone. */
    decode_ms_per_token: z.number().nonnegative().default(0),
    /** Fixed cost per request (scheduling, HTTP), milliseconds. */
    overhead_ms: z.number().nonnegative().default(0),
    /** Decode slows by this fraction per other running request (batching is sub-linear). */
    concurrency_slowdown: z.number().nonnegative().default(0),
    /** Requests decoded at once; the rest wait (vllm:num_requests_waiting). */
    max_num_seqs: z.number().int().positive().default(256),
  })
  .default({ prefill_ms_per_token: 0, decode_ms_per_token: 0, overhead_ms: 0, concurrency_slowdown: 0, max_num_seqs: 256 });
export type SimLatency = z.infer<typeof SimLatency>;

/** A latency model in the range of an 8B model on one GPU, for benchmarks and the demo. */
export const REALISTIC_LATENCY: SimLatency = {
  prefill_ms_per_token: 0.05,
  decode_ms_per_token: 2,
  overhead_ms: 2,
  concurrency_slowdown: 0.01,
  max_num_seqs: 256,
};

/** Length distribution of the filler text answered to prompts no policy recognises. */
export const SimFiller = z
  .strictObject({
    /** Lognormal median length in tokens (before the final `<|im_end|>`). */
    median_tokens: z.number().positive().default(48),
    /** Lognormal sigma of the length. */
    sigma: z.number().nonnegative().default(0.6),
    min_tokens: z.number().int().nonnegative().default(1),
    max_tokens: z.number().int().positive().default(2048),
  })
  .default({ median_tokens: 48, sigma: 0.6, min_tokens: 1, max_tokens: 2048 });
export type SimFiller = z.infer<typeof SimFiller>;

/**
 * Options of `startSim` and of `raas sim-llm --config <yaml>` (same keys). Every field has a
 * default: `startSim()` alone serves a Qwen3-8B look-alike with zero latency on a free port.
 */
export const SimOptions = z.strictObject({
  port: z.number().int().min(0).max(65535).default(0),
  host: z.string().default('127.0.0.1'),
  seed: z.number().int().default(0),
  model: z.string().default('Qwen/Qwen3-8B'),
  max_model_len: z.number().int().positive().default(40960),
  weight_version: z.string().default('default'),
  /** Dataset files (JSONL or Parquet) the scripted task policies recognise instances from. */
  datasets: z.array(z.string()).default([]),
  /**
   * Modules that teach the simulator custom tasks (docs/tasks.md): each default export is a task
   * script `{data_source, match(row), right(row), wrong?(row)}` played over the datasets' rows of
   * that data_source, a policy `{name, respond(ctx)}`, or an array of them.
   */
  policies: z.array(z.string().min(1)).default([]),
  /** Beta(alpha, beta) of the per-instance success probability of the scripted policies. */
  policy: z.strictObject({ alpha: z.number().positive().optional(), beta: z.number().positive().optional() }).default({}),
  latency: SimLatency,
  filler: SimFiller,
  /** A weight update aborts the requests in flight (finish_reason abort), as servers in abort mode do. */
  abort_on_weight_update: z.boolean().default(true),
  /** Rise of each instance's success probability per weight update. */
  boost_per_update: z.number().min(0).max(1).default(0.03),
  /** Per-instance pass rates and how they move with weight updates (src/sim/difficulty.ts): `beta` (the Beta draw + boost_per_update) or `logit`. */
  difficulty: SimDifficulty,
  /** Prefix-cache capacity in 16-token blocks (LRU beyond it). */
  prefix_cache_blocks: z.number().int().nonnegative().default(65536),
  /**
   * vLLM's `--logprobs-mode`: `raw_logprobs` (vLLM's default: before temperature, top-k and top-p)
   * or `processed_logprobs` (after them: what veRL starts vLLM with). The vLLM routes only.
   */
  logprobs_mode: z.enum(LOGPROBS_MODES).default('raw_logprobs'),
  /** Requests kept in the in-memory request log (for fidelity tests); 0 keeps none. */
  request_log: z.number().int().nonnegative().default(0),
  /** Serve the tokenize routes (vLLM's POST /tokenize, SGLang's POST /v1/tokenize); false: 404, as a server without them. */
  tokenize_route: z.boolean().default(true),
  /** Added to every id the tokenize routes answer: a backend whose tokenizer differs from raas's (tests). */
  tokenize_perturb: z.number().int().default(0),
  /** Instead of Qwen3: a local tokenizer folder (tokenizer.json + tokenizer_config.json) or a Hugging Face model id in the local hub cache. */
  tokenizer: z.string().optional(),
});
/** Input shape: every field optional. */
export type SimOptions = z.input<typeof SimOptions>;
/** Resolved options, every default filled. */
export type SimConfig = z.infer<typeof SimOptions>;
