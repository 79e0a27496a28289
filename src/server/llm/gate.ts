import type { GenerationStatus, PauseMode, PauseResponse } from '../../protocol/pause.js';
import { systemClock, type Clock } from '../../util/clock.js';
import { postJson } from './http.js';
import type { LlmApi } from '../../protocol/llm.js';

/** Deadline of one abort request to a backend. */
const ABORT_CALL_MS = 10_000;

/** The reason a call dropped by a pause is aborted with (told apart from the job's own cancel). */
export class PausedAbort extends Error {
  constructor() {
    super('generation paused: the call was dropped after abort_grace_s');
    this.name = 'PausedAbort';
  }
}

/** The backend a call went to, as the gate needs it (where to send an abort). */
export interface GateBackend {
  readonly address: string;
  readonly api: LlmApi;
}

/** One model call between send and answer. */
export interface GateCall {
  readonly backend: GateBackend;
  readonly requestId: string;
  /** Aborted when a pause in abort mode drops the call. */
  readonly signal: AbortSignal;
}

interface Entry extends GateCall {
  controller: AbortController;
  /** How the call ended: the backend cut it (`abort`), it was dropped, or it finished. */
  outcome?: 'abort' | 'dropped' | 'done';
}

/**
 * The rollout server's generation gate (POST /pause, POST /resume): while paused no model call
 * starts; jobs wait in `enter()` and go on after `resume()`. A pause answers once no call is in
 * flight: `drain` lets running calls finish, `abort` asks each backend to cut its calls (they come
 * back with `finish_reason: "abort"` and the agent continues the turn after the resume) and drops the
 * connection of those still running after the grace.
 */
export class GenerationGate {
  private mode: PauseMode | undefined;
  private readonly calls = new Set<Entry>();
  private readonly waiting = new Set<() => void>();
  private readonly idle = new Set<() => void>();

  constructor(
    private readonly clock: Clock = systemClock,
    /** Told when generation pauses and resumes (the pool's breakers stop counting meanwhile). */
    private readonly hooks: { paused?(): void; resumed?(): void } = {},
  ) {}

  get paused(): boolean {
    return this.mode !== undefined;
  }

  status(): GenerationStatus {
    return { paused: this.paused, ...(this.mode ? { mode: this.mode } : {}), in_flight: this.calls.size, held: this.waiting.size };
  }

  /**
   * Resolves at once when not paused, else after resume(); rejects with the signal's reason.
   * `onHold(true)` runs when the wait begins and `onHold(false)` when it ends (the job's timer
   * does not count held time).
   */
  async hold(signal?: AbortSignal, onHold?: (held: boolean) => void): Promise<void> {
    signal?.throwIfAborted();
    if (!this.paused) return;
    onHold?.(true);
    try {
      while (this.paused) {
        await new Promise<void>((resolve, reject) => {
          const release = (): void => {
            signal?.removeEventListener('abort', onAbort);
            this.waiting.delete(release);
            resolve();
          };
          const onAbort = (): void => {
            this.waiting.delete(release);
            reject(signal!.reason);
          };
          this.waiting.add(release);
          signal?.addEventListener('abort', onAbort, { once: true });
        });
      }
    } finally {
      onHold?.(false);
    }
  }

  /** Waits while paused, then registers a call to `backend` (no await between the check and the registration). */
  async enter(backend: GateBackend, requestId: string, signal?: AbortSignal, onHold?: (held: boolean) => void): Promise<GateCall> {
    await this.hold(signal, onHold);
    const controller = new AbortController();
    const entry: Entry = { backend, requestId, controller, signal: controller.signal };
    this.calls.add(entry);
    return entry;
  }

  /** Ends a call registered by enter(); `aborted`: the backend answered `finish_reason: "abort"`. Safe twice. */
  exit(call: GateCall, aborted = false): void {
    const e = call as Entry;
    if (!this.calls.delete(e)) return;
    e.outcome = e.controller.signal.aborted ? 'dropped' : aborted ? 'abort' : 'done';
    if (this.calls.size === 0) for (const f of [...this.idle]) f();
  }

  /**
   * Stops new calls and answers once none is in flight. Pausing again while paused changes the
   * mode (a drain may be turned into an abort).
   */
  async pause(mode: PauseMode, abortGraceMs: number): Promise<PauseResponse> {
    this.mode = mode;
    this.hooks.paused?.();
    const inFlight = [...this.calls];
    if (mode === 'abort' && inFlight.length > 0) {
      const asked = await Promise.all(inFlight.map((c) => askAbort(c)));
      // A backend that refused (no abort route) has its calls dropped at once; the rest get the grace.
      asked.forEach((ok, i) => ok || this.drop(inFlight[i]!));
      if (!(await this.idleWithin(abortGraceMs))) for (const c of [...this.calls]) this.drop(c);
    }
    await this.idleWithin(Number.POSITIVE_INFINITY);
    const count = (o: Entry['outcome']): number => inFlight.filter((c) => c.outcome === o).length;
    return {
      status: 'paused',
      mode,
      in_flight: inFlight.length,
      aborted: count('abort'),
      disconnected: count('dropped'),
      held: this.waiting.size,
    };
  }

  /** Lets held jobs go on. Safe when not paused. */
  resume(): { status: 'running'; released: number } {
    const was = this.mode !== undefined;
    this.mode = undefined;
    if (was) this.hooks.resumed?.();
    const held = [...this.waiting];
    for (const release of held) release();
    return { status: 'running', released: held.length };
  }

  private drop(c: Entry): void {
    if (this.calls.has(c)) c.controller.abort(new PausedAbort());
  }

  /** True once no call is in flight; false when `ms` passed first. */
  private idleWithin(ms: number): Promise<boolean> {
    if (this.calls.size === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      let timer: unknown;
      const done = (ok: boolean): void => {
        this.idle.delete(onIdle);
        if (timer !== undefined) this.clock.clearTimeout(timer);
        resolve(ok);
      };
      const onIdle = (): void => done(true);
      this.idle.add(onIdle);
      if (Number.isFinite(ms)) timer = this.clock.setTimeout(() => done(false), ms);
    });
  }
}

/**
 * Asks the call's backend to cut it, so the call answers with its partial output and
 * `finish_reason: "abort"`: SGLang `POST /abort_request {rid}`; vLLM `POST /abort_requests` (its RLHF
 * dev route), naming the id as sent and as recent releases know a completion (`cmpl-<id>-0`).
 * False when the backend refused or has no such route.
 */
async function askAbort(c: GateCall): Promise<boolean> {
  const { address, api } = c.backend;
  try {
    if (api === 'sglang') await postJson(`${address}/abort_request`, { rid: c.requestId, abort_all: false }, undefined, ABORT_CALL_MS);
    else await postJson(`${address}/abort_requests`, { request_ids: [c.requestId, `cmpl-${c.requestId}-0`] }, undefined, ABORT_CALL_MS);
    return true;
  } catch {
    return false;
  }
}
