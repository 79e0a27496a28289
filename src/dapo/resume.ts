import path from 'node:path';
import type { TrainConfig } from '../protocol/config-train.js';
import { RaasError } from '../protocol/errors.js';
import type { TrainCheckpoint } from './checkpoint.js';
import { parseTrainConfig } from './config.js';
import { readRunConfig, readTrainCheckpoint } from './run-writer.js';

/** What `raas train --resume <dir>` runs with. */
export interface ResumePlan {
  cfg: TrainConfig;
  resume: { dir: string; checkpoint: TrainCheckpoint };
}

/**
 * Reads a run directory for `--resume`: its checkpoint.json, and the config — the one given on the
 * command line (`loaded`, e.g. with moved servers), else the resolved config the run saved
 * (config.json). The config's `name` must be the checkpoint's: job ids derive from it.
 */
export async function planResume(dir: string, loaded: TrainConfig | undefined): Promise<ResumePlan> {
  const abs = path.resolve(dir);
  const checkpoint = await readTrainCheckpoint(abs);
  let saved: TrainConfig | undefined;
  try {
    saved = parseTrainConfig(await readRunConfig(abs), `${abs}/config.json`);
  } catch (err) {
    if (!loaded) throw err;
  }
  const cfg = loaded ?? saved!;
  // What the checkpoint's groups and job ids were built from must not change under them.
  for (const key of ['n', 'seed', 'mode'] as const) {
    if (saved && cfg[key] !== saved[key]) {
      throw new RaasError(
        'config_invalid',
        `--resume ${abs}: key "${key}" is ${JSON.stringify(cfg[key])} in the given config but ${JSON.stringify(saved[key])} in the run's config.json; a resumed run keeps it (start a new run to change it)`,
        { retryable: false },
      );
    }
  }
  if (saved && cfg.dataset.path !== saved.dataset.path) {
    throw new RaasError(
      'config_invalid',
      `--resume ${abs}: key "dataset.path" is ${cfg.dataset.path} in the given config but ${saved.dataset.path} in the run's config.json; the checkpoint's dataset cursor belongs to the run's dataset`,
      { retryable: false },
    );
  }
  const name = checkpoint.coordinator.name;
  if (cfg.name !== name) {
    throw new RaasError(
      'config_invalid',
      `--resume ${abs}: the config's name "${cfg.name}" differs from the run's "${name}"; job ids derive from it (set name: ${name})`,
      { retryable: false },
    );
  }
  return { cfg, resume: { dir: abs, checkpoint } };
}
