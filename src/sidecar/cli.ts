import path from 'node:path';
import { Option, type Command } from 'commander';
import { SIDECAR_LIMITS } from '../protocol/sidecar.js';
import { setHelp, collect } from '../util/config-flags.js';
import type { LogLevel } from './log.js';
import { serveStdio } from './stdio.js';
import { examples } from '../util/help.js';

/** Registers `raas sidecar --config x.yaml`: the JSON-lines protocol on stdin/stdout (docs/sidecar.md). */
export function registerSidecar(program: Command): void {
  program
    .command('sidecar')
    .description('serve the coordinator to a Python trainer: JSON lines on stdin/stdout, logs on stderr (docs/sidecar.md)')
    .addHelpText(
      'after',
      examples([
        [`printf '{"id": 1, "op": "hello"}\\n' | raas sidecar --config configs/demo.yaml`, 'one request; stdin closed ends the sidecar'],
      ]),
    )
    .requiredOption('-c, --config <path>', 'training config (YAML), as for raas train')
    .option('--return-messages', 'put messages (with their token ids) on every rollout, as return_messages: true in the config')
    .option(
      '--max-line-bytes <n>',
      'longest request line accepted',
      (v) => positiveInt(v, '--max-line-bytes'),
      SIDECAR_LIMITS.max_line_bytes,
    )
    .option(
      '--progress-interval-s <s>',
      'step_progress event period while next_batch waits (0: off)',
      (v) => nonNegative(v, '--progress-interval-s'),
      2,
    )
    .option('--close-timeout-s <s>', 'longest wait for a clean close before exiting', (v) => nonNegative(v, '--close-timeout-s'), 30)
    .addOption(new Option('--log-level <level>', 'stderr log level').choices(['debug', 'info', 'warn', 'error', 'silent']).default('info'))
    .option('--set <key=value>', setHelp('sampling_params.temperature=0.7'), collect)
    .option('--output-dir <dir>', "where the run directory <dir>/<name>/ goes (default: the config's output_dir, runs)")
    .option('--keep-batches', 'also append every batch to <run dir>/batches.jsonl (what raas show reads)')
    .option('--no-outputs', 'write no run directory (metrics.jsonl, summary.json, plot.svg, prompts.jsonl)')
    .option(
      '--metrics-port <port>',
      "serve the coordinator's Prometheus metrics on 127.0.0.1:<port>/metrics (0: a free port, logged)",
      (v) => port(v, '--metrics-port'),
    )
    .action(
      async (o: {
        config: string;
        set?: string[];
        metricsPort?: number;
        returnMessages?: boolean;
        outputDir?: string;
        keepBatches?: boolean;
        outputs: boolean;
        maxLineBytes: number;
        progressIntervalS: number;
        closeTimeoutS: number;
        logLevel: LogLevel;
      }) => {
        await serveStdio(
          async (log) => {
            // Imported here so that nothing the coordinator loads runs before stdout is guarded.
            const { loadTrainConfig } = await import('../dapo/index.js');
            const { dapoBackend } = await import('./dapo-backend.js');
            const config = loadTrainConfig(o.config, o.returnMessages ? { return_messages: true } : {}, o.set);
            let backend = dapoBackend(config, { configDir: path.dirname(path.resolve(o.config)), log });
            if (o.outputs) {
              const { withRunOutputs } = await import('../dapo/metrics-sidecar-run.js');
              const dir = path.resolve(o.outputDir ?? config.output_dir, config.name);
              backend = withRunOutputs(backend, config, { dir, keepBatches: o.keepBatches === true, log });
            }
            if (o.metricsPort === undefined) return backend;
            const { CoordinatorMetrics } = await import('../dapo/metrics.js');
            const { serveMetrics } = await import('../dapo/metrics-server.js');
            const { withMetrics } = await import('../dapo/metrics-sidecar.js');
            const metrics = new CoordinatorMetrics();
            const prom = await serveMetrics(metrics.registry, o.metricsPort); // ends with the process
            log.info(`Prometheus metrics on ${prom.url}`);
            return withMetrics(backend, metrics);
          },
          {
            maxLineBytes: o.maxLineBytes,
            progressIntervalMs: o.progressIntervalS * 1000,
            closeTimeoutMs: o.closeTimeoutS * 1000,
            logLevel: o.logLevel,
          },
        );
      },
    );
}

function positiveInt(v: string, flag: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`${flag} must be a positive integer, got "${v}"`);
  return n;
}

function port(v: string, flag: string): number {
  const n = Number(v);
  if (!/^\d+$/.test(v.trim()) || n > 65535) throw new Error(`${flag} must be a port number 0..65535, got "${v}"`);
  return n;
}

function nonNegative(v: string, flag: string): number {
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${flag} must be a number >= 0, got "${v}"`);
  return n;
}
