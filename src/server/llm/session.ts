import { ContextLengthError, RaasError } from '../../protocol/errors.js';
import type { SamplingParams } from '../../protocol/process.js';
import { sleep, type Clock } from '../../util/clock.js';
import { seedOf } from '../../util/hash.js';
import { isUnreachable } from './http.js';
import { gateOf, type Backend, type BackendPool } from './pool.js';
import type { GenerateRequest, GenerateResult, LlmSession } from './types.js';

/** Hooks the session reports to (/metrics). */
export interface SessionObserver {
  llmCall?(api: string, seconds: number): void;
  move?(): void;
}

export interface SessionOptions {
  pool: BackendPool;
  jobId: string;
  groupId: string | undefined;
  sampling: SamplingParams;
  /** The job's seed; each request is seeded with hash(seed, turn). Absent: hash(sampling seed or 0, job id, turn). */
  seed?: number;
  clock: Clock;
  observer?: SessionObserver;
  random?: () => number;
  /** Called with true when the job starts waiting for a paused server's resume, false when it goes on. */
  onHold?: (held: boolean) => void;
}

/**
 * A job's LlmSession: bound to one backend from its first use in RUN (except under round_robin), seeds each
 * request with hash(job seed, turn), clamps max_tokens to what is left of max_model_len,
 * retries connection errors with capped exponential backoff, and moves the job to a live backend
 * (same full prompt ids) when its own stays down past the retry budget or its breaker opens (calls
 * in flight end then). Each call has a deadline derived from its max_tokens (pool.deadlineMs), and
 * reports its outcome to the backend's circuit breaker. While the server's
 * generation is paused (POST /pause) no call starts: the job waits at the pool's gate.
 */
export class JobLlmSession implements LlmSession {
  private bound: Backend | undefined;
  private last: string | null = null;
  private readonly dead = new Set<Backend>();
  private readonly records: Array<{ backend: string; weight_version: string }> = [];
  private calls = 0;
  private moves = 0;
  /** The failure that made the last backend count as dead (named when none is left). */
  private lastError: RaasError | undefined;
  private released = false;

  constructor(private readonly o: SessionOptions) {}

  get backend(): string | null {
    return this.bound?.address ?? this.last;
  }

  get turns(): ReadonlyArray<{ backend: string; weight_version: string }> {
    return this.records;
  }

  private get roundRobin(): boolean {
    return this.o.pool.config.routing === 'round_robin';
  }

  /** Takes a backend for the job as it enters RUN (no-op under round_robin or when the pool is empty). */
  bind(): void {
    if (!this.roundRobin && !this.bound && !this.released) this.bound = this.o.pool.acquire(this.o.groupId, this.dead);
  }

  /** Gives the backend back (RUN ended). Safe twice. */
  release(): void {
    this.released = true;
    if (this.bound) this.o.pool.release(this.bound, this.o.groupId);
    this.last = this.bound?.address ?? this.last;
    this.bound = undefined;
  }

  async maxModelLen(signal?: AbortSignal): Promise<number | undefined> {
    if (this.o.sampling.max_model_len !== undefined) return this.o.sampling.max_model_len;
    // A paused server's backends may be asleep: not even /v1/models is asked then.
    await gateOf(this.o.pool).hold(signal, this.o.onHold);
    const b = this.bound ?? this.o.pool.anyHealthy();
    return b ? b.client.maxModelLen(signal) : undefined;
  }

  async generate(req: GenerateRequest): Promise<GenerateResult> {
    await gateOf(this.o.pool).hold(req.signal, this.o.onHold);
    const turn = this.calls++;
    const seed = this.o.seed === undefined ? seedOf(this.o.sampling.seed ?? 0, this.o.jobId, turn) : seedOf(this.o.seed, turn);
    let maxTokens = req.max_tokens;
    const limit = await this.maxModelLen(req.signal);
    if (limit !== undefined) {
      const left = limit - req.prompt_ids.length;
      if (left <= 0)
        throw new ContextLengthError(`the prompt has ${req.prompt_ids.length} tokens and max_model_len is ${limit}: no room to generate`);
      maxTokens = Math.min(maxTokens, left);
    }
    for (;;) {
      const backend = this.roundRobin ? this.o.pool.nextRoundRobin(this.dead) : this.takeBound();
      if (!backend) throw this.noBackend();
      try {
        const r = await this.callWithRetries(backend, { ...req, max_tokens: maxTokens }, seed, turn);
        this.records.push({ backend: backend.address, weight_version: r.weight_version });
        this.last = backend.address;
        return { ...r, backend: backend.address };
      } catch (err) {
        if (req.signal?.aborted || !(err instanceof RaasError) || !err.retryable) throw err;
        // The backend stayed down past its retry budget, or its breaker opened: move the job with its full prompt ids.
        this.lastError = err;
        this.dead.add(backend);
        if (!this.roundRobin) {
          this.o.pool.release(backend, this.o.groupId);
          this.bound = undefined;
        }
        this.countMove(err);
      } finally {
        if (this.roundRobin) this.o.pool.release(backend);
      }
    }
  }

  /** The job's backend; when its breaker opened since the last turn, a healthy one instead (a move). */
  private takeBound(): Backend | undefined {
    const old = this.bound;
    if (old && !old.healthy) {
      this.o.pool.release(old, this.o.groupId);
      this.bound = undefined;
      this.lastError = new RaasError('backend_unavailable', `LLM backend ${old.address} is marked unhealthy (last: ${old.lastError})`);
    }
    if (!this.bound) {
      this.bound = this.o.pool.acquire(this.o.groupId, this.dead);
      if (old && !old.healthy && this.bound) this.countMove(this.lastError!);
    }
    return this.bound;
  }

  /** Counts a move off a backend; past max_moves the job fails with `err`. */
  private countMove(err: RaasError): void {
    if (++this.moves > this.o.pool.config.max_moves) throw err;
    this.o.pool.moves++;
    this.o.observer?.move?.();
  }

  /** The error of a job left without a backend; it names the last failure, so a crashed backend can be told from a slow or garbled one. */
  private noBackend(): RaasError {
    const unhealthy = this.o.pool.unhealthy();
    if (!this.dead.size && !unhealthy.length)
      return new RaasError('backend_unavailable', 'no LLM backend is registered: POST /add_llm_server');
    const counts = [`${this.dead.size} tried`, ...(unhealthy.length ? [`${unhealthy.length} marked unhealthy`] : [])].join(', ');
    const last = this.lastError?.message ?? unhealthy[0]?.lastError;
    return new RaasError('backend_unavailable', `every LLM backend stopped answering (${counts}${last ? `; last: ${last}` : ''})`, {
      cause: this.lastError,
    });
  }

  private async callWithRetries(backend: Backend, req: GenerateRequest, seed: number, turn: number) {
    const requestId = `${this.o.jobId}-turn-${turn}`;
    const timeoutMs = this.o.pool.deadlineMs(req.max_tokens);
    // Aborted by the backend's breaker when it opens: the call (or the backoff) ends and the job moves.
    const breaker = new AbortController();
    const stop = req.signal ? AbortSignal.any([req.signal, breaker.signal]) : breaker.signal;
    backend.calls.add(breaker);
    try {
      return await this.attempts(backend, req, seed, requestId, timeoutMs, breaker.signal, stop);
    } finally {
      backend.calls.delete(breaker);
    }
  }

  private async attempts(
    backend: Backend,
    req: GenerateRequest,
    seed: number,
    requestId: string,
    timeoutMs: number,
    breaker: AbortSignal,
    stop: AbortSignal,
  ) {
    const cfg = this.o.pool.config;
    const random = this.o.random ?? Math.random;
    const gate = gateOf(this.o.pool);
    for (let attempt = 0; ; attempt++) {
      // Each attempt passes the gate: a pause that began during a backoff holds the retry too.
      const call = await gate.enter(backend, requestId, req.signal, this.o.onHold);
      let cut = false;
      // The version the backend serves as the call starts (a held call starts after the update).
      const weight_version = backend.weightVersion;
      const t0 = this.o.clock.now();
      try {
        // The breaker opened while the call waited at a paused gate: move instead of calling.
        if (breaker.aborted) throw breaker.reason;
        const signal = AbortSignal.any([stop, call.signal]);
        const r = await backend.client.generate({
          ...req,
          signal,
          timeout_ms: timeoutMs,
          seed,
          sampling: this.o.sampling,
          request_id: requestId,
        });
        this.o.pool.succeeded(backend);
        this.o.observer?.llmCall?.(backend.api, (this.o.clock.now() - t0) / 1000);
        cut = r.finish_reason === 'abort';
        return { ...r, weight_version };
      } catch (err) {
        // A pause dropped the call after its grace: an aborted call with nothing kept, continued after the resume.
        if (call.signal.aborted && !stop.aborted) return { ids: [], logprobs: [], finish_reason: 'abort' as const, weight_version };
        if (req.signal?.aborted) throw err;
        if (breaker.aborted) throw breaker.reason;
        if (isUnreachable(err)) this.o.pool.failed(backend, err);
        // No retry on a backend whose breaker is open (this failure may have opened it): the job moves now.
        if (!(err instanceof RaasError) || !err.retryable || attempt >= cfg.retries || !backend.healthy) throw err;
        // Capped exponential backoff with jitter (half to full delay).
        const delay = Math.min(cfg.backoff_max_ms, cfg.backoff_base_ms * 2 ** attempt) * (0.5 + random() / 2);
        gate.exit(call);
        await sleep(delay, stop, this.o.clock);
      } finally {
        gate.exit(call, cut);
      }
    }
  }
}
