import type { Batch, UpdateWeightsRequest } from '../protocol/batch.js';
import type { PauseRequest } from '../protocol/pause.js';

/**
 * The seam between the line protocol and the DAPO coordinator: the sidecar only needs these calls,
 * so tests can drive the protocol with another real implementation and `dapo-backend.ts` adapts
 * the real `Coordinator`.
 */
export interface SidecarCoordinator {
  nextBatch(opts: { signal?: AbortSignal; timeout_s?: number }): Promise<Batch>;
  updateWeights(req: UpdateWeightsRequest): Promise<{ policy_version: number }>;
  /** Stops admission and model calls (co-located trainers); answers once none is in flight. */
  pause(req: PauseRequest, opts: { signal?: AbortSignal }): Promise<unknown>;
  /** Ends a pause. */
  resume(): Promise<unknown>;
  status(): unknown;
  checkpoint(): unknown;
  /** `cancel: false` leaves the jobs in flight running on their servers (a resume re-attaches to them). */
  close(opts?: { cancel?: boolean }): Promise<void>;
}

/** Options of an `eval` op: overrides of the config's `eval` section. */
export interface SidecarEvalOptions {
  dataset?: Record<string, unknown> & { path: string };
  n?: number;
  output?: string;
  signal: AbortSignal;
}

/** What the sidecar serves from: the loaded config, and how to start, resume and evaluate. */
export interface SidecarBackend {
  /** Facts `hello` reports without starting anything. */
  info(): { batch_size: number; group_size: number; name?: string };
  /** A started coordinator (`new Coordinator(config)` + `start()`). */
  start(signal: AbortSignal): Promise<SidecarCoordinator>;
  /** A started coordinator restored from a `checkpoint()` state. */
  resume(state: Record<string, unknown>, signal: AbortSignal): Promise<SidecarCoordinator>;
  /** One evaluation pass (`runEval`); its result is answered as is. */
  eval(opts: SidecarEvalOptions): Promise<unknown>;
}

/** Logs go to stderr; `warn` also reaches the trainer as a `warning` event. */
export interface SidecarLog {
  info(msg: string): void;
  warn(msg: string, data?: Record<string, unknown>): void;
  error(msg: string): void;
  /** Where `warn` also sends its message as an event (runSidecar sets it while serving). */
  setWarningSink?(sink: ((msg: string, data?: Record<string, unknown>) => void) | undefined): void;
}
