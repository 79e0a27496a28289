import type { Tokenizer } from '../tokens/tokenizer.js';
import type { SimPolicy } from './policy.js';
import type { SimConfig } from './options.js';
import { rng, seedOf } from '../util/hash.js';
import { sleep, systemClock, type Clock } from '../util/clock.js';
import { Filler, sampleLogprob } from './filler.js';
import { positionLogprobs, wireLogprob, type LogprobsMode } from './logprobs.js';
import { PrefixCache, hashIds } from './prefix-cache.js';
import { difficultyModel, type DifficultyModel } from './difficulty.js';

/** One generation request, normalised from either wire format. */
export interface SimRequest {
  api: 'vllm' | 'sglang';
  request_id: string;
  prompt_ids: number[];
  max_tokens: number;
  /** Absent: a fresh random seed, as vLLM does. */
  seed?: number;
  temperature?: number;
  top_p?: number;
  top_k?: number;
  stop_token_ids: number[];
  /** The request's other sampling fields as sent (penalties, stop strings, ...): recorded, not modelled. */
  sampling?: Record<string, unknown>;
}

/** What the engine generated for one request. */
export interface SimOutput {
  ids: number[];
  /** The sampled tokens' logprobs, raw or processed as the backend's logprobs mode says. */
  logprobs: number[];
  /** Per position, the simulated distribution's other tokens (for `top_logprobs`): their logprob in the same mode and how many there are. */
  tail: Array<{ logprob: number; count: number }>;
  finish: 'stop' | 'length' | 'abort';
  /** The stop id that ended generation (eos included), else null. */
  matched: number | null;
  /** The weight version when the request started. */
  weight_version: string;
  cached_tokens: number;
  abort_message?: string;
}

/** A request-log entry: what the backend sent back, for fidelity tests. */
export interface SimLogEntry extends SimOutput {
  api: 'vllm' | 'sglang';
  request_id: string;
  seed: number | undefined;
  prompt_ids: number[];
  max_tokens: number;
  sampling: Record<string, unknown>;
}

interface InFlight {
  abort(message: string): void;
}

/**
 * The simulated inference engine behind both wire formats: plans a response (a scripted policy's
 * turn or seeded filler), cuts it at stop ids and max_tokens, and plays it out under the latency
 * model, so a weight update or an /abort_request can cut it short like a real server.
 */
export class SimEngine {
  weightVersion: string;
  updates = 0;
  running = 0;
  waiting = 0;
  readonly counters = { prefix_cache_queries: 0, prefix_cache_hits: 0, prompt_tokens: 0, generation_tokens: 0, requests: 0, aborted: 0 };
  /** Seconds spent per phase, summed over requests (vLLM's request_*_time_seconds histograms' _sum). */
  readonly seconds = { queue: 0, prefill: 0, decode: 0, e2e: 0 };
  readonly log: SimLogEntry[] = [];
  readonly cache: PrefixCache;
  private readonly inFlight = new Map<string, InFlight>();
  private readonly queue: Array<() => void> = [];
  private readonly filler: Filler;
  private readonly difficulty: DifficultyModel;
  private unseeded = 0;
  private prefillTail: Promise<void> = Promise.resolve();
  // Remainders of aborted responses, keyed by the sequence a continuation will send (prompt + ids so
  // far): the re-sent request finishes the same response, as the agent's abort-continuation expects.
  private readonly continuations = new Map<string, number[]>();

  constructor(
    readonly cfg: SimConfig,
    readonly tokenizer: Tokenizer,
    private readonly policies: SimPolicy[],
    private readonly clock: Clock = systemClock,
  ) {
    this.weightVersion = cfg.weight_version;
    this.cache = new PrefixCache(cfg.prefix_cache_blocks);
    this.filler = new Filler(tokenizer, cfg.filler);
    this.difficulty = difficultyModel(cfg.difficulty, { seed: cfg.seed, boostPerUpdate: cfg.boost_per_update });
  }

  /** Generates one response; `signal` (client gone) aborts it like /abort_request. */
  async generate(req: SimRequest, signal?: AbortSignal): Promise<SimOutput> {
    const weight_version = this.weightVersion;
    const seed = this.seedFor(req);
    const plan = this.plan(req, seed);
    const { ids, matched, finish } = this.cut(plan, req);
    const rand = rng(seedOf('logprobs', seed, ids.length));
    // The logprobs mode is a vLLM server flag; the SGLang routes report raw logprobs.
    const mode: LogprobsMode = req.api === 'vllm' ? this.cfg.logprobs_mode : 'raw_logprobs';
    const positions = ids.map(() => positionLogprobs(sampleLogprob(rand), mode, req));
    const logprobs = positions.map((p) => wireLogprob(p.logprob));
    const tail = positions.map((p) => ({ logprob: wireLogprob(p.tailLogprob), count: p.tailCount }));
    this.counters.requests++;

    let abortMessage: string | undefined;
    const ctrl = new AbortController();
    const entry: InFlight = {
      abort: (m) => {
        abortMessage ??= m;
        ctrl.abort();
      },
    };
    const onClientGone = (): void => entry.abort('client disconnected');
    signal?.addEventListener('abort', onClientGone, { once: true });
    this.inFlight.set(req.request_id, entry);
    let produced = ids.length;
    let cached = 0;
    const t0 = this.clock.now();
    try {
      await this.acquire(ctrl.signal);
      const t1 = this.clock.now();
      this.seconds.queue += (t1 - t0) / 1000;
      try {
        const lat = this.cfg.latency;
        if (lat.overhead_ms > 0) await sleep(lat.overhead_ms, ctrl.signal, this.clock);
        cached = lat.prefill_ms_per_token > 0 ? await this.serialPrefill(req.prompt_ids, ctrl.signal) : this.prefill(req.prompt_ids);
        const t2 = this.clock.now();
        this.seconds.prefill += (t2 - t1) / 1000;
        produced = await this.decode(ids.length, ctrl.signal);
        this.seconds.decode += (this.clock.now() - t2) / 1000;
      } finally {
        this.release();
      }
    } catch (err) {
      if (!ctrl.signal.aborted) throw err;
      produced = 0; // aborted while waiting or in prefill
    } finally {
      signal?.removeEventListener('abort', onClientGone);
      this.inFlight.delete(req.request_id);
    }
    const aborted = ctrl.signal.aborted && produced < ids.length;
    if (aborted) this.rememberContinuation([...req.prompt_ids, ...ids.slice(0, produced)], plan.slice(produced));
    const out: SimOutput = aborted
      ? {
          ids: ids.slice(0, produced),
          logprobs: logprobs.slice(0, produced),
          tail: tail.slice(0, produced),
          finish: 'abort',
          matched: null,
          weight_version,
          cached_tokens: cached,
          abort_message: abortMessage,
        }
      : { ids, logprobs, tail, finish, matched, weight_version, cached_tokens: cached };
    if (aborted) this.counters.aborted++;
    this.seconds.e2e += (this.clock.now() - t0) / 1000;
    this.counters.generation_tokens += out.ids.length;
    this.cache.insert([...req.prompt_ids, ...out.ids]);
    if (this.cfg.request_log > 0) {
      if (this.log.length >= this.cfg.request_log) this.log.shift();
      this.log.push({
        ...out,
        api: req.api,
        request_id: req.request_id,
        seed: req.seed,
        prompt_ids: req.prompt_ids,
        max_tokens: req.max_tokens,
        sampling: req.sampling ?? {},
      });
    }
    return out;
  }

  /** Aborts one in-flight request by id; true when it was running. */
  abort(requestId: string, message = 'Abort request'): boolean {
    const e = this.inFlight.get(requestId);
    e?.abort(message);
    return e !== undefined;
  }

  /** Aborts every in-flight request; returns how many. */
  abortAll(message = 'Abort all requests'): number {
    const n = this.inFlight.size;
    for (const e of this.inFlight.values()) e.abort(message);
    return n;
  }

  /** A weight update: new version, one more update (policies get better), in-flight requests aborted if configured. */
  updateWeights(version: string | undefined): { aborted: number } {
    const aborted = this.cfg.abort_on_weight_update ? this.abortAll('Abort: weights are being updated') : 0;
    this.updates++;
    this.weightVersion = version ?? String(this.updates);
    return { aborted };
  }

  get inFlightCount(): number {
    return this.inFlight.size;
  }

  private seedFor(req: SimRequest): number {
    // Greedy decoding ignores the seed; an absent seed is fresh per request (vLLM's behaviour).
    const s = req.temperature === 0 ? 'greedy' : (req.seed ?? `unseeded-${this.unseeded++}-${Math.random()}`);
    return seedOf(this.cfg.seed, s, hashIds(req.prompt_ids));
  }

  /** The whole response the "model" would produce: a policy's scripted turn or filler, ending in eos. */
  private plan(req: SimRequest, seed: number): number[] {
    const key = continuationKey(req.prompt_ids);
    const rest = this.continuations.get(key);
    if (rest) {
      this.continuations.delete(key);
      return rest;
    }
    if (this.policies.length > 0) {
      const ctx = {
        // As a model reads it: a tool's printed `<|im_start|>` is not a turn.
        promptText: this.tokenizer.decodeStructured(req.prompt_ids),
        promptIds: req.prompt_ids,
        rng: rng(seedOf('policy', seed)),
        weightVersion: this.weightVersion,
        updates: this.updates,
        boostPerUpdate: this.cfg.boost_per_update,
        passRate: (key: string, base: number) => this.difficulty.passRate(key, base, this.updates),
      };
      for (const p of this.policies) {
        const turn = p.respond(ctx);
        if (turn) return [...this.tokenizer.encode(turn.text), this.tokenizer.eosId];
      }
    }
    return this.filler.ids(rng(seedOf('filler', seed)));
  }

  /** Looks the prompt up in the prefix cache (counted as vLLM counts it, in tokens) and caches it. */
  private prefill(prompt: readonly number[]): number {
    const cached = this.cache.lookup(prompt);
    this.counters.prefix_cache_queries += prompt.length;
    this.counters.prefix_cache_hits += cached;
    this.counters.prompt_tokens += prompt.length;
    this.cache.insert(prompt);
    return cached;
  }

  /**
   * Prefill is compute-bound: a backend prefills one request at a time, in arrival order. The cache
   * is looked up when a request's turn comes, so the n rollouts of a group that arrive together
   * compute their shared prompt once, as vLLM's scheduler reuses blocks computed by earlier steps.
   */
  private async serialPrefill(prompt: readonly number[], signal: AbortSignal): Promise<number> {
    const prev = this.prefillTail;
    let done!: () => void;
    this.prefillTail = new Promise<void>((r) => (done = r));
    try {
      await abortable(prev, signal);
      const cached = this.prefill(prompt);
      const ms = (prompt.length - cached) * this.cfg.latency.prefill_ms_per_token;
      if (ms > 0) await sleep(ms, signal, this.clock);
      return cached;
    } finally {
      // An aborted waiter still passes the turn on, only after the one before it is done.
      void prev.then(done);
    }
  }

  private rememberContinuation(sequence: number[], rest: number[]): void {
    if (rest.length === 0) return;
    this.continuations.set(continuationKey(sequence), rest);
    // Bounded: a client that never continues must not grow the map forever.
    if (this.continuations.size > 4096) this.continuations.delete(this.continuations.keys().next().value as string);
  }

  /** Cuts the plan after the first stop id (eos always stops), or at max_tokens. */
  private cut(plan: number[], req: SimRequest): { ids: number[]; matched: number | null; finish: 'stop' | 'length' } {
    const stops = new Set([this.tokenizer.eosId, ...req.stop_token_ids]);
    const limit = Math.min(plan.length, req.max_tokens);
    for (let i = 0; i < limit; i++) {
      if (stops.has(plan[i]!)) return { ids: plan.slice(0, i + 1), matched: plan[i]!, finish: 'stop' };
    }
    return { ids: plan.slice(0, limit), matched: null, finish: 'length' };
  }

  /** Plays out decoding in chunks (concurrency is re-read per chunk); returns the ids produced before an abort. */
  private async decode(n: number, signal: AbortSignal): Promise<number> {
    const lat = this.cfg.latency;
    if (lat.decode_ms_per_token === 0) return signal.aborted ? 0 : n;
    const CHUNK = 16;
    let done = 0;
    while (done < n) {
      const k = Math.min(CHUNK, n - done);
      const perToken = lat.decode_ms_per_token * (1 + lat.concurrency_slowdown * Math.max(0, this.running - 1));
      const start = this.clock.now();
      try {
        await sleep(k * perToken, signal, this.clock);
      } catch {
        return done + Math.min(k, Math.floor((this.clock.now() - start) / perToken));
      }
      done += k;
    }
    return done;
  }

  private async acquire(signal: AbortSignal): Promise<void> {
    if (this.running < this.cfg.latency.max_num_seqs) {
      this.running++;
      return;
    }
    this.waiting++;
    try {
      await new Promise<void>((resolve, reject) => {
        const go = (): void => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        };
        const onAbort = (): void => {
          const i = this.queue.indexOf(go);
          if (i >= 0) this.queue.splice(i, 1);
          reject(signal.reason);
        };
        signal.addEventListener('abort', onAbort, { once: true });
        this.queue.push(go);
      });
    } finally {
      this.waiting--;
    }
  }

  /** Hands the slot straight to the next waiter (running stays), so no newcomer can jump the queue. */
  private release(): void {
    const next = this.queue.shift();
    if (next) next();
    else this.running--;
  }
}

function continuationKey(ids: readonly number[]): string {
  return `${ids.length}:${hashIds(ids)}:${hashIds(ids.slice(-64))}`;
}

/** Waits for `p`, or rejects with the signal's reason when it aborts first. */
function abortable(p: Promise<void>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<void>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    void p.then(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    });
  });
}
