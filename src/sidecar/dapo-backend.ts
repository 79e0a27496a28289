import path from 'node:path';
import { Coordinator, runEval } from '../dapo/index.js';
import type { TrainConfig } from '../protocol/config-train.js';
import type { SidecarBackend, SidecarCoordinator, SidecarEvalOptions, SidecarLog } from './types.js';

/**
 * The real backend: the DAPO coordinator of `config`. `configDir` resolves relative paths an
 * `eval` op names (as the config's own paths are resolved against its file's directory).
 */
export function dapoBackend(config: TrainConfig, opts: { configDir: string; log: SidecarLog }): SidecarBackend {
  let evals = 0;
  return {
    info: () => ({ batch_size: config.batch_size, group_size: config.n, name: config.name }),
    start: (signal) => started(new Coordinator(config), signal, opts.log),
    resume: (state, signal) => started(Coordinator.resume(config, state), signal, opts.log),
    eval: (e: SidecarEvalOptions) => {
      const dataset = e.dataset ? { ...e.dataset, path: path.resolve(opts.configDir, e.dataset.path) } : config.eval.dataset;
      const output = e.output ? path.resolve(opts.configDir, e.output) : config.eval.output;
      const cfg = { ...config, eval: { ...config.eval, dataset, n: e.n ?? config.eval.n, output } };
      // A fresh tag per op: job ids of an earlier eval on the same servers must not be re-attached.
      const tag = `sidecar-${process.pid}-${evals++}`;
      return runEval(cfg as TrainConfig, { signal: e.signal, tag });
    },
  };
}

/** Starts the coordinator; an abort during start closes what it opened. */
async function started(c: Coordinator, signal: AbortSignal, log: SidecarLog): Promise<SidecarCoordinator> {
  const onAbort = (): void => {
    void c.close().catch((err: unknown) => log.error(`close after aborted start failed: ${String(err)}`));
  };
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    await c.start();
    signal.throwIfAborted();
  } catch (err) {
    await c.close().catch(() => undefined);
    throw signal.aborted ? signal.reason : err;
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
  log.info(`coordinator "${c.config.name}" started`);
  return c;
}
