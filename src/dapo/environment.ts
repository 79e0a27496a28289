import got from 'got';
import type { BackendRef, RegistryRef, ServerRef, TrainConfig, EmbeddedConfig } from '../protocol/config-train.js';
import { EmbeddedConfig as EmbeddedSchema } from '../protocol/config-train.js';
import { RaasError } from '../protocol/errors.js';
import { startRolloutServer } from '../server/index.js';
import { startSim, type SimHandle } from '../sim/index.js';

const debug = (msg: string): void => {
  if (/\bdapo\b/.test(process.env.RAAS_DEBUG ?? '')) process.stderr.write(`[dapo] ${msg}\n`);
};

/** How long close() waits for embedded rollout servers. */
const CLOSE_DEADLINE_MS = 10_000;

/** The rollout servers and LLM backends a coordinator works with, and what it must stop at close. */
export interface Environment {
  servers: ServerRef[];
  /** The registry the servers joined, when the config names one instead of a list. */
  registry?: RegistryRef;
  backends: BackendRef[];
  /** Embedded only: moves every simulator to a new weight version (one more update). */
  bumpSims(weightVersion: string): Promise<void>;
  close(): Promise<void>;
}

/** Configured servers as given, or (embedded) a local rollout server and simulators started now. */
export async function startEnvironment(cfg: TrainConfig): Promise<Environment> {
  if (cfg.embedded === false) {
    if (!Array.isArray(cfg.servers))
      return { servers: [], registry: cfg.servers, backends: cfg.backends, bumpSims: async () => {}, close: async () => {} };
    if (cfg.servers.length === 0)
      throw new RaasError('config_invalid', 'servers: expected at least one rollout server {url}, or embedded: true to start a local one', {
        retryable: false,
      });
    return { servers: cfg.servers, backends: cfg.backends, bumpSims: async () => {}, close: async () => {} };
  }
  const opts: EmbeddedConfig = cfg.embedded === true ? EmbeddedSchema.parse({}) : cfg.embedded;
  return startEmbedded(cfg, opts);
}

async function startEmbedded(cfg: TrainConfig, opts: EmbeddedConfig): Promise<Environment> {
  const sims: SimHandle[] = [];
  const servers: Array<{ url: string; close(): Promise<void> }> = [];
  const closeAll = async (): Promise<void> => {
    debug(`embedded: closing ${servers.length} rollout server(s)`);
    // A server whose close hangs (seen with sandboxed jobs mid-cancel) must not hang the trainer:
    // after the deadline we go on; bwrap sandboxes run with --die-with-parent and end with us.
    const all = Promise.allSettled(servers.map((s) => s.close()));
    let timer: NodeJS.Timeout | undefined;
    const late = await Promise.race([
      all.then(() => false),
      new Promise<boolean>((r) => (timer = setTimeout(() => r(true), CLOSE_DEADLINE_MS))),
    ]);
    clearTimeout(timer);
    if (late)
      process.stderr.write(
        `raas: an embedded rollout server did not close within ${CLOSE_DEADLINE_MS / 1000}s; continuing (its sandboxes end with this process)\n`,
      );
    debug(`embedded: closing ${sims.length} simulator(s)`);
    await Promise.allSettled(sims.map((s) => s.close()));
    debug('embedded: closed');
  };
  try {
    for (let i = 0; i < opts.backends; i++) {
      // One seed for every simulator: an instance's success probability must not depend on the backend.
      sims.push(
        await startSim({ seed: cfg.seed, datasets: [cfg.dataset.path], abort_on_weight_update: false, weight_version: '0', ...opts.sim }),
      );
    }
    for (let i = 0; i < opts.servers; i++) {
      servers.push(await startRolloutServer({ port: 0, host: '127.0.0.1', ...opts.server } as never));
    }
  } catch (err) {
    await closeAll();
    throw err;
  }
  let closing: Promise<void> | undefined;
  return {
    servers: servers.map((s) => ({ url: s.url })),
    backends: sims.map((s) => ({ address: s.url, api: opts.api })),
    async bumpSims(weightVersion) {
      await Promise.all(
        sims.map((s) => got.post(`${s.url}/finish_weight_update`, { json: { weight_version: weightVersion }, retry: { limit: 2 } })),
      );
    },
    close() {
      closing ??= closeAll();
      return closing;
    },
  };
}
