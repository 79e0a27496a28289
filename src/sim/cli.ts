import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { InvalidArgumentError, type Command } from 'commander';
import { parse as parseYaml } from 'yaml';
import { checkConfig, isMapping } from '../protocol/config-errors.js';
import { SIM_PATH_KEYS, resolveConfigPaths } from '../protocol/config-paths.js';
import { RaasError } from '../protocol/errors.js';
import { intArg, numberArg, portArg } from '../util/config-flags.js';
import { REALISTIC_LATENCY, startSim, type SimOptions as SimOptionsInput } from './index.js';
import { SimOptions } from './options.js';
import { examples } from '../util/help.js';

/** configs/data in the package (from dist/src/sim or, under tsx, src/sim): the datasets `raas sim-llm` recognises when given none. */
const BUNDLED_DATA_DIR =
  ['../../../configs/data/', '../../configs/data/']
    .map((p) => fileURLToPath(new URL(p, import.meta.url)))
    .find((d) => existsSync(path.join(d, 'math.jsonl'))) ?? '';

/** The bundled dataset files (math, code, swe and their veRL-row twins). */
function bundledDatasets(): string[] {
  if (!BUNDLED_DATA_DIR) return [];
  try {
    return readdirSync(BUNDLED_DATA_DIR)
      .filter((f) => f.endsWith('.jsonl'))
      .sort()
      .map((f) => path.join(BUNDLED_DATA_DIR, f));
  } catch {
    return [];
  }
}

/** Reads a sim config YAML (the keys of SimOptions), checked key by key; a missing or bad file names the fix. */
export function readSimConfig(file: string): SimOptionsInput {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new RaasError('config_invalid', `sim-llm: cannot read --config ${file}: ${(err as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new RaasError('config_invalid', `${file}: not valid YAML: ${(err as Error).message}`);
  }
  if (doc == null) return {};
  if (!isMapping(doc)) throw new RaasError('config_invalid', `sim-llm: ${file} must be a YAML mapping of simulator options`);
  // A full raas config may nest the simulator's keys under `sim:`.
  const nested = isMapping(doc.sim);
  // Paths in the file are relative to the file, as in `raas serve --config`.
  const opts = resolveConfigPaths((nested ? doc.sim : doc) as Record<string, unknown>, path.dirname(path.resolve(file)), SIM_PATH_KEYS);
  checkConfig(SimOptions, opts, { file }, nested ? ['sim'] : []);
  return opts as SimOptionsInput;
}

interface SimFlags {
  port?: number;
  host?: string;
  seed?: number;
  config?: string;
  dataset?: string[];
  policy?: string[];
  passRate?: number;
  bundledDatasets: boolean;
  realisticLatency?: boolean;
  logprobsMode?: string;
}

/** Registers `raas sim-llm`: a simulated vLLM/SGLang backend with real token ids. */
export function registerSimLlm(program: Command): void {
  program
    .command('sim-llm')
    .description('run a simulated vLLM/SGLang backend (token-in/token-out, real Qwen3 ids, scripted task policies)')
    .addHelpText(
      'after',
      examples([
        ['raas sim-llm --port 9000 --seed 1', 'vLLM and SGLang routes; plays the bundled tasks (configs/data)'],
        ['raas sim-llm --port 9000 --pass-rate 1 --dataset configs/data/code.jsonl', 'plays every row right: does the grader pay?'],
        ['raas sim-llm --port 9000 --config configs/slurm/sim.yaml --realistic-latency', 'options from a file, the latency of an 8B model'],
      ]),
    )
    .option('--port <n>', 'port to listen on (0 picks a free one)', portArg('--port'))
    .option('--host <host>', 'address to bind', undefined)
    .option('--seed <n>', 'seed of filler text and policies', intArg('--seed', { min: 0 }))
    .option('--config <file>', 'YAML with simulator options (model, max_model_len, datasets, latency, filler, ...)')
    .option(
      '--dataset <file...>',
      'dataset files (JSONL/Parquet) the scripted policies recognise (default: the bundled configs/data/*.jsonl)',
    )
    .option(
      '--policy <module...>',
      'modules that teach the simulator custom tasks (a task script or a policy per default export; docs/tasks.md)',
    )
    .option(
      '--pass-rate <p>',
      'every instance is solved with probability p (1: always, 0: never), instead of its seeded draw',
      (v: string) => {
        const p = numberArg('--pass-rate', { nonNegative: true })(v);
        if (p > 1) throw new InvalidArgumentError(`--pass-rate: must be a number 0–1, got "${v}"`);
        return p;
      },
    )
    .option('--no-bundled-datasets', 'without --dataset or config datasets, answer every prompt with filler text')
    .option('--realistic-latency', 'use a realistic latency model (an 8B model on one GPU) instead of zero')
    .option(
      '--logprobs-mode <mode>',
      "vLLM's --logprobs-mode: raw_logprobs (default) or processed_logprobs (after temperature, top-k, top-p)",
    )
    .action(async (flags: SimFlags) => {
      const opts: SimOptionsInput = flags.config ? readSimConfig(flags.config) : {};
      if (flags.port !== undefined) opts.port = flags.port;
      if (flags.host !== undefined) opts.host = flags.host;
      if (flags.seed !== undefined) opts.seed = flags.seed;
      if (flags.dataset) opts.datasets = [...(opts.datasets ?? []), ...flags.dataset.map((f) => path.resolve(f))];
      if (flags.policy) opts.policies = [...(opts.policies ?? []), ...flags.policy.map((f) => path.resolve(f))];
      if (flags.passRate !== undefined) opts.difficulty = { model: 'fixed', pass_rate: flags.passRate };
      // The quick start's math jobs get real answers without any flag.
      if (!opts.datasets?.length && flags.bundledDatasets) opts.datasets = bundledDatasets();
      if (flags.logprobsMode !== undefined) opts.logprobs_mode = flags.logprobsMode as SimOptionsInput['logprobs_mode'];
      if (flags.realisticLatency) opts.latency = { ...REALISTIC_LATENCY, ...(opts.latency ?? {}) };
      const cfg = checkConfig(SimOptions, opts, { file: flags.config ?? 'raas sim-llm' });
      const sim = await startSim(opts);
      process.stdout.write(
        `raas sim-llm listening on ${sim.url} (model ${sim.config.model}, max_model_len ${sim.config.max_model_len}, ${cfg.datasets.length} dataset file(s))\n`,
      );
      const stop = (): void => {
        void sim.close().then(() => process.exit(0));
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
}
