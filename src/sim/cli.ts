import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { parse as parseYaml } from 'yaml';
import { RaasError } from '../protocol/errors.js';
import { REALISTIC_LATENCY, startSim, type SimOptions } from './index.js';

/** Reads a sim config YAML (the keys of SimOptions); a missing or bad file names the fix. */
export function readSimConfig(file: string): SimOptions {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new RaasError('config_invalid', `sim-llm: cannot read --config ${file}: ${(err as Error).message}`);
  }
  const doc = parseYaml(text) as unknown;
  if (doc == null) return {};
  if (typeof doc !== 'object' || Array.isArray(doc)) throw new RaasError('config_invalid', `sim-llm: ${file} must be a YAML mapping of simulator options`);
  // A full raas config may nest the simulator's keys under `sim:`.
  const d = doc as Record<string, unknown>;
  const opts = { ...((typeof d.sim === 'object' && d.sim !== null ? d.sim : d) as SimOptions) };
  // Paths in the file are relative to the file, as in `raas serve --config`.
  const dir = path.dirname(path.resolve(file));
  if (Array.isArray(opts.datasets)) opts.datasets = opts.datasets.map((p) => (typeof p === 'string' ? path.resolve(dir, p) : p));
  if (typeof opts.tokenizer === 'string') opts.tokenizer = path.resolve(dir, opts.tokenizer);
  return opts;
}

/** Registers `raas sim-llm`: a simulated vLLM/SGLang backend with real token ids. */
export function registerSimLlm(program: Command): void {
  program
    .command('sim-llm')
    .description('run a simulated vLLM/SGLang backend (token-in/token-out, real Qwen3 ids, scripted task policies)')
    .option('--port <n>', 'port to listen on (0 picks a free one)', (v) => Number.parseInt(v, 10))
    .option('--host <host>', 'address to bind', undefined)
    .option('--seed <n>', 'seed of filler text and policies', (v) => Number.parseInt(v, 10))
    .option('--config <file>', 'YAML with simulator options (model, max_model_len, datasets, latency, filler, ...)')
    .option('--dataset <file...>', 'dataset files (JSONL/Parquet) the scripted policies recognise')
    .option('--realistic-latency', 'use a realistic latency model (an 8B model on one GPU) instead of zero')
    .option('--logprobs-mode <mode>', "vLLM's --logprobs-mode: raw_logprobs (default) or processed_logprobs (after temperature, top-k, top-p)")
    .action(async (flags: { port?: number; host?: string; seed?: number; config?: string; dataset?: string[]; realisticLatency?: boolean; logprobsMode?: string }) => {
      const opts: SimOptions = flags.config ? readSimConfig(flags.config) : {};
      if (flags.port !== undefined) opts.port = flags.port;
      if (flags.host !== undefined) opts.host = flags.host;
      if (flags.seed !== undefined) opts.seed = flags.seed;
      if (flags.dataset) opts.datasets = [...(opts.datasets ?? []), ...flags.dataset];
      if (flags.logprobsMode !== undefined) opts.logprobs_mode = flags.logprobsMode as SimOptions['logprobs_mode'];
      if (flags.realisticLatency) opts.latency = { ...REALISTIC_LATENCY, ...(opts.latency ?? {}) };
      const sim = await startSim(opts);
      process.stdout.write(`raas sim-llm listening on ${sim.url} (model ${sim.config.model}, max_model_len ${sim.config.max_model_len})\n`);
      const stop = (): void => {
        void sim.close().then(() => process.exit(0));
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
}
