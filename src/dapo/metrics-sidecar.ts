import type { SidecarBackend, SidecarCoordinator } from '../sidecar/types.js';
import type { CoordinatorStatus } from './coordinator.js';
import { stepRecord, type CoordinatorMetrics } from './metrics.js';

/**
 * `raas sidecar --metrics-port`: the backend's coordinators feed `metrics` — the live gauges read the
 * coordinator started last (a resume replaces it), every batch handed to the trainer is observed.
 */
export function withMetrics(
  backend: SidecarBackend,
  metrics: CoordinatorMetrics,
  clock: () => number = () => performance.now(),
): SidecarBackend {
  const t0 = clock();
  const wrap = (c: SidecarCoordinator): SidecarCoordinator => {
    metrics.setSource(() => c.status() as CoordinatorStatus);
    return decorate(c, {
      nextBatch: async (opts) => {
        const b = await c.nextBatch(opts);
        metrics.observe(stepRecord(b, (clock() - t0) / 1000));
        return b;
      },
    });
  };
  return {
    info: () => backend.info(),
    start: async (signal) => wrap(await backend.start(signal)),
    resume: async (state, signal) => wrap(await backend.resume(state, signal)),
    eval: (o) => backend.eval(o),
  };
}

/** A coordinator that is `c` but for the calls in `over` (the sidecar wrappers observe a few calls and pass the rest on). */
export function decorate(c: SidecarCoordinator, over: Partial<SidecarCoordinator>): SidecarCoordinator {
  return {
    nextBatch: (o) => c.nextBatch(o),
    updateWeights: (r) => c.updateWeights(r),
    pause: (r, o) => c.pause(r, o),
    resume: () => c.resume(),
    status: () => c.status(),
    checkpoint: () => c.checkpoint(),
    close: (o) => c.close(o),
    ...over,
  };
}
