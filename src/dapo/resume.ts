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
  const cfg = loaded ?? parseTrainConfig(await readRunConfig(abs), `${abs}/config.json`);
  const name = checkpoint.coordinator.name;
  if (cfg.name !== name) {
    throw new RaasError('config_invalid', `--resume ${abs}: the config's name "${cfg.name}" differs from the run's "${name}"; job ids derive from it (set name: ${name})`, { retryable: false });
  }
  return { cfg, resume: { dir: abs, checkpoint } };
}
