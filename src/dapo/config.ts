import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { TrainConfig, type TrainConfigInput } from '../protocol/config-train.js';
import { ServerConfig } from '../protocol/config-server.js';
import { checkAll, checkConfig, isMapping, type IssueSource } from '../protocol/config-errors.js';
import { applySets, parseSets, resolveSetPaths } from '../util/config-sets.js';
import { TRAIN_PATH_KEYS, resolveConfigPaths } from '../protocol/config-paths.js';
import { RaasError } from '../protocol/errors.js';
import { unsupportedSampling, type LlmApi } from '../protocol/llm.js';
import { SandboxConfig } from '../protocol/config-sandbox.js';
import { SimOptions } from '../sim/options.js';

/**
 * Validates a training config object at every depth (the options handed to the embedded simulators,
 * rollout server and sandboxes included, and the sampling parameters against the backends' APIs).
 * Errors (code config_invalid) have one line per problem naming the source, the full key path and
 * the nearest valid key.
 */
export function parseTrainConfig(input: unknown, source: string | IssueSource = 'config'): TrainConfig {
  const src = typeof source === 'string' ? { file: source } : source;
  const raw = isMapping(input) ? input : {};
  const emb = isMapping(raw.embedded) ? raw.embedded : undefined;
  let cfg: TrainConfig | undefined;
  checkAll([
    () => (cfg = checkConfig(TrainConfig, input ?? {}, src)),
    // What embedded mode hands to startSim, startRolloutServer and the sandboxes, checked now rather than ~10 s later.
    () => emb?.sim !== undefined && isMapping(emb.sim) && checkConfig(SimOptions, emb.sim, src, ['embedded', 'sim']),
    () => emb?.server !== undefined && isMapping(emb.server) && checkConfig(ServerConfig, emb.server, src, ['embedded', 'server']),
    () =>
      isMapping(emb?.server) &&
      isMapping(emb.server.sandbox) &&
      checkConfig(SandboxConfig, emb.server.sandbox, src, ['embedded', 'server', 'sandbox']),
  ]);
  const c = cfg!;
  const apis = new Set<LlmApi>(typeof c.embedded === 'object' ? [c.embedded.api] : c.embedded ? ['vllm'] : []);
  for (const b of c.backends) apis.add(typeof b === 'string' ? 'vllm' : (b.api ?? 'vllm'));
  const bad = [...apis].flatMap((api) => unsupportedSampling(api, c.sampling_params));
  if (bad.length) throw new RaasError('config_invalid', bad.map((l) => `${src.file}: ${l}`).join('\n'), { retryable: false });
  const sel = selectionProblems(c);
  if (sel.length) throw new RaasError('config_invalid', sel.map((l) => `${src.file}: ${l}`).join('\n'), { retryable: false });
  return c;
}

/** Checks across keys the schema cannot express (adaptive n's bounds against n). */
function selectionProblems(c: TrainConfig): string[] {
  const a = c.selection.adaptive_n;
  if (!a) return [];
  const out: string[] = [];
  if (a.min > a.max) out.push(`\`selection.adaptive_n.min\`: ${a.min} is above \`selection.adaptive_n.max\` (${a.max}); set min ≤ max`);
  if (c.n < 2) out.push(`\`selection.adaptive_n\`: needs n ≥ 2 (a group of one is never informative), got n=${c.n}`);
  if (a.batch === 'fixed' && a.max < c.n)
    out.push(
      `\`selection.adaptive_n.max\`: ${a.max} is below n=${c.n}; a fixed batch keeps n rollouts per group, so groups grow from n up to max (set max ≥ n)`,
    );
  return out;
}

/** Reads a YAML (or JSON) config file into a mapping; errors name the file. */
function readConfigFile(file: string, what = 'name, dataset, n, batch_size, ...'): Record<string, unknown> {
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
  if (raw !== null && raw !== undefined && !isMapping(raw)) {
    throw new RaasError('config_invalid', `${file}: expected a mapping of keys (${what}) at the top level`, { retryable: false });
  }
  return (raw as Record<string, unknown>) ?? {};
}

/**
 * Reads a YAML (or JSON) training config, applies `overrides` (flags) and `sets` (`--set key.path=value`
 * texts, typed through the schema). Every relative path written in the file (TRAIN_PATH_KEYS: the
 * datasets, eval output, output_dir, trainer cwd, token files, and the embedded simulators' and
 * servers' paths) is resolved against the file's folder, so a config works from any working
 * directory; paths given by `--set` or flags are relative to the working directory. A trainer command
 * without `cwd` runs in the file's folder.
 */
export function loadTrainConfig(file: string, overrides: Partial<TrainConfigInput> = {}, sets: readonly string[] = []): TrainConfig {
  const base = path.dirname(path.resolve(file));
  const assignments = parseSets(sets);
  const fromFile = resolveConfigPaths(readConfigFile(file), base, TRAIN_PATH_KEYS);
  if (isMapping(fromFile.trainer) && typeof fromFile.trainer.command === 'string' && fromFile.trainer.cwd === undefined)
    fromFile.trainer = { ...fromFile.trainer, cwd: base };
  const doc = applySets({ ...fromFile, ...overrides }, resolveSetPaths(assignments, process.cwd(), TRAIN_PATH_KEYS));
  return parseTrainConfig(doc, { file, sets: assignments });
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
