import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import type { z } from 'zod';
import { TrainConfig, type TrainConfigInput } from '../protocol/config-train.js';
import { RaasError, fieldPath } from '../protocol/errors.js';

/** Turns zod issues into one message that names each key and what it expects. */
export function describeIssues(issues: ReadonlyArray<z.core.$ZodIssue>, source: string): string {
  const lines = issues.map((i) => {
    const key = fieldPath(i.path);
    if (i.code === 'unrecognized_keys') {
      const where = i.path.length ? `${key}.` : '';
      return `unknown key ${i.keys.map((k) => `"${where}${k}"`).join(', ')} (check the spelling; docs/training.md lists every key)`;
    }
    return `key "${key}": ${i.message}`;
  });
  return `${source}: invalid training config: ${lines.join('; ')}`;
}

/** Validates a training config object; errors (code config_invalid) name the key and the expected value. */
export function parseTrainConfig(input: unknown, source = 'config'): TrainConfig {
  const r = TrainConfig.safeParse(input ?? {});
  if (!r.success) throw new RaasError('config_invalid', describeIssues(r.error.issues, source), { retryable: false });
  return r.data;
}

/**
 * Reads a YAML (or JSON) training config. Relative paths inside it (dataset, eval dataset, output
 * dir, trainer cwd) are resolved against the config file's directory, so a config works from any cwd.
 */
export function loadTrainConfig(file: string, overrides: Partial<TrainConfigInput> = {}): TrainConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new RaasError('config_invalid', `cannot read config file ${file}: ${(err as Error).message}`, { retryable: false });
  }
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    throw new RaasError('config_invalid', `${file}: not valid YAML: ${(err as Error).message}`, { retryable: false });
  }
  if (raw !== null && raw !== undefined && (typeof raw !== 'object' || Array.isArray(raw))) {
    throw new RaasError('config_invalid', `${file}: expected a mapping of keys (name, dataset, n, batch_size, ...) at the top level`, { retryable: false });
  }
  const cfg = parseTrainConfig({ ...(raw as object), ...overrides }, file);
  return resolvePaths(cfg, path.dirname(path.resolve(file)));
}

/** Resolves the config's relative paths against `base`. */
export function resolvePaths(cfg: TrainConfig, base: string): TrainConfig {
  const abs = (p: string): string => (path.isAbsolute(p) ? p : path.resolve(base, p));
  return {
    ...cfg,
    dataset: { ...cfg.dataset, path: abs(cfg.dataset.path) },
    eval: { ...cfg.eval, ...(cfg.eval.dataset ? { dataset: { ...cfg.eval.dataset, path: abs(cfg.eval.dataset.path) } } : {}) },
    trainer: { ...cfg.trainer, ...(cfg.trainer.cwd ? { cwd: abs(cfg.trainer.cwd) } : {}) },
  };
}

/** Applies `--smoke` (fewer steps, optionally smaller batches) to a parsed config. */
export function applySmoke(cfg: TrainConfig): TrainConfig {
  return {
    ...cfg,
    steps: Math.min(cfg.steps, cfg.smoke.steps),
    batch_size: cfg.smoke.batch_size ?? cfg.batch_size,
    n: cfg.smoke.n ?? cfg.n,
  };
}
