import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Command } from 'commander';
import { CancelledError, RaasError } from '../protocol/errors.js';
import { applySmoke, loadTrainConfig } from './config.js';
import { runEval } from './eval.js';
import { runTraining } from './train.js';
import { planResume } from './resume.js';
import { CoordinatorMetrics, plural } from './metrics.js';
import { serveMetrics, type MetricsServer } from './metrics-server.js';
import { TrainerCommandError } from './trainer-command.js';
import { setHelp, collect, intArg } from '../util/config-flags.js';
import { examples } from '../util/help.js';

/** Ctrl-C (and SIGTERM) abort the signal once; a second Ctrl-C exits at once. */
function interruptSignal(): { signal: AbortSignal; dispose(): void } {
  const ac = new AbortController();
  let count = 0;
  const on = (): void => {
    count++;
    if (count > 1) process.exit(130);
    process.stderr.write('\nraas: interrupted; writing the checkpoint and stopping (Ctrl-C again to exit at once)\n');
    ac.abort(new CancelledError('interrupted'));
  };
  process.on('SIGINT', on);
  process.on('SIGTERM', on);
  return { signal: ac.signal, dispose: () => (process.off('SIGINT', on), process.off('SIGTERM', on)) };
}

/** Registers `raas train` and `raas eval`. */
export function registerTrain(program: Command): void {
  program
    .command('train')
    .description('run DAPO training steps: embedded (local rollout server + simulated backends) or against configured servers')
    .addHelpText(
      'after',
      examples([
        ['raas train configs/demo.yaml', 'embedded: a local rollout server and simulated backends; writes runs/demo/'],
        ['raas train configs/demo.yaml --set n=2 --set sampling_params.temperature=0.7', 'override keys (typed, checked)'],
        ['raas train --resume runs/demo --steps 6', 'continue an interrupted (or finished) run up to 6 steps'],
      ]),
    )
    .argument('[config]', "training config (YAML); optional with --resume (the run directory's config.json is used)")
    .option('-c, --config <file>', 'the training config, as the argument (the form raas serve and raas sidecar take)')
    .option('--smoke', "CI smoke run: the config's smoke overrides (fewer steps)")
    .option('--steps <n>', 'override steps', intArg('--steps', { min: 1 }))
    .option('--set <key=value>', setHelp('sampling_params.temperature=0.7'), collect)
    .option('--name <name>', 'override the run name (runs/<name>/)')
    .option('--output-dir <dir>', 'override output_dir')
    .option(
      '--resume <run-dir>',
      'continue an interrupted run from <run-dir>/checkpoint.json: re-attach to its jobs in flight, append to its outputs',
    )
    .option(
      '--metrics-port <port>',
      "serve the coordinator's Prometheus metrics on 127.0.0.1:<port>/metrics (0: a free port, printed)",
      (v) => metricsPort(v),
    )
    .option(
      '--progress-interval-s <s>',
      'when stderr is not a terminal, a progress line every <s> seconds while a step waits (0: none)',
      intArg('--progress-interval-s', { min: 0 }),
      30,
    )
    .action(
      async (
        arg: string | undefined,
        o: {
          config?: string;
          smoke?: boolean;
          steps?: number;
          name?: string;
          outputDir?: string;
          metricsPort?: number;
          resume?: string;
          set?: string[];
          progressIntervalS: number;
        },
      ) => {
        const file = configArg(arg, o.config);
        if (file === undefined && !o.resume)
          throw new RaasError(
            'config_invalid',
            'raas train: give a training config (raas train <config>) or a run to continue (raas train --resume <run-dir>)',
          );
        if (o.resume && o.outputDir)
          throw new RaasError('config_invalid', '--output-dir: not with --resume (a resumed run writes into its own directory)');
        if (o.resume && o.smoke)
          throw new RaasError(
            'config_invalid',
            '--smoke: not with --resume (the run keeps the n and batch_size it started with; --steps sets how many steps)',
          );
        // --resume without a config: --set applies to the run's own config.json.
        const source = file ?? (o.resume && o.set?.length ? path.join(o.resume, 'config.json') : undefined);
        let cfg =
          source === undefined
            ? undefined
            : loadTrainConfig(source, { ...(o.name ? { name: o.name } : {}), ...(o.outputDir ? { output_dir: o.outputDir } : {}) }, o.set);
        const plan = o.resume ? await planResume(o.resume, cfg) : undefined;
        cfg = plan?.cfg ?? cfg!;
        if (o.smoke) cfg = applySmoke(cfg);
        if (o.steps !== undefined) {
          if (!Number.isInteger(o.steps) || o.steps < 1) throw new RaasError('config_invalid', '--steps: expected a positive integer');
          cfg = { ...cfg, steps: o.steps };
        }
        if (plan && plan.resume.checkpoint.steps_done >= cfg.steps) {
          process.stderr.write(
            `raas train: ${plan.resume.dir} already finished ${plural(plan.resume.checkpoint.steps_done, 'step')} of ${cfg.steps}; ask for more with --steps\n`,
          );
          return;
        }
        const runDir = plan?.resume.dir ?? path.resolve(cfg.output_dir, cfg.name);
        const { signal, dispose } = interruptSignal();
        let prom: MetricsServer | undefined;
        try {
          const metrics = o.metricsPort === undefined ? undefined : new CoordinatorMetrics();
          if (metrics) {
            prom = await serveMetrics(metrics.registry, o.metricsPort!);
            process.stderr.write(`raas train: Prometheus metrics on ${prom.url}\n`);
          }
          const s = await runTraining(cfg, {
            signal,
            stderr: process.stderr,
            metrics,
            progressIntervalS: o.progressIntervalS,
            ...(plan ? { resume: plan.resume } : {}),
          });
          const first = s.first_mean_reward as number | undefined;
          const last = s.last_mean_reward as number | undefined;
          process.stderr.write(
            `raas train: ${plural(s.steps.length, 'step')} in ${(s.wall_s as number).toFixed(1)}s; mean reward ${first?.toFixed(3)} → ${last?.toFixed(3)}; outputs in ${s.run_dir}\n`,
          );
          process.stdout.write(
            JSON.stringify({
              run_dir: s.run_dir,
              steps: s.steps.length,
              first_mean_reward: first,
              last_mean_reward: last,
              waste_fraction: s.waste_fraction,
            }) + '\n',
          );
        } catch (err) {
          if (err instanceof TrainerCommandError) {
            process.stderr.write(`raas train: ${err.message}\nraas train: continue the run with: raas train --resume ${runDir}\n`);
            process.exitCode = err.exitCode;
            return;
          }
          if (signal.aborted) {
            const kept =
              cfg.embedded === false
                ? 'jobs in flight keep running on the rollout servers and are re-attached by the resume'
                : 'the embedded servers and their jobs were stopped';
            process.stderr.write(`raas train: interrupted; ${kept}; continue with: raas train --resume ${runDir}\n`);
            process.exitCode = 130;
            return;
          }
          throw err;
        } finally {
          dispose();
          await prom?.close();
        }
        // Everything is closed; exit now rather than wait on a stray keep-alive handle.
        process.exit(process.exitCode ?? 0);
      },
    );

  program
    .command('eval')
    .description('one pass over a dataset: n rollouts per prompt, no filtering, no weight updates; pass@1 and pass@n per data source')
    .addHelpText('after', examples([['raas eval configs/demo.yaml --n 4', 'pass@1 and pass@4 per data source, into runs/demo/eval.json']]))
    .argument('[config]', 'training config (YAML); its eval section picks the dataset and n')
    .option('-c, --config <file>', 'the training config, as the argument')
    .option('--n <n>', 'rollouts per prompt', intArg('--n', { min: 1 }))
    .option('--set <key=value>', setHelp('sampling_params.temperature=0.7'), collect)
    .option('--output <file>', 'write the report JSON here (default runs/<name>/eval.json)')
    .option('--tag <tag>', 'job id tag, to evaluate again against the same servers', '0')
    .action(async (arg: string | undefined, o: { config?: string; n?: number; output?: string; tag: string; set?: string[] }) => {
      const file = configArg(arg, o.config);
      if (file === undefined) throw new RaasError('config_invalid', 'raas eval: give a training config: raas eval <config>');
      const cfg = loadTrainConfig(file, {}, o.set);
      if (o.n !== undefined) cfg.eval = { ...cfg.eval, n: o.n };
      const { signal, dispose } = interruptSignal();
      try {
        const report = await runEval(cfg, {
          signal,
          tag: o.tag,
          onProgress: (d, t) => process.stderr.isTTY && process.stderr.write(`\reval: ${d}/${t} prompts`),
        });
        if (process.stderr.isTTY) process.stderr.write('\n');
        const out = o.output ?? cfg.eval.output ?? path.join(cfg.output_dir, cfg.name, 'eval.json');
        await mkdir(path.dirname(path.resolve(out)), { recursive: true });
        await writeFile(out, JSON.stringify(report, null, 2) + '\n');
        for (const [ds, r] of Object.entries(report.data_sources)) {
          process.stderr.write(
            `${ds.padEnd(12)} prompts ${r.prompts}  pass@1 ${r.pass_at_1.toFixed(3)}  pass@${report.n} ${r.pass_at_n.toFixed(3)}  errors ${r.errors}\n`,
          );
        }
        process.stdout.write(JSON.stringify(report) + '\n');
      } catch (err) {
        if (signal.aborted) {
          process.exitCode = 130;
          return;
        }
        throw err;
      } finally {
        dispose();
      }
    });
}

/** The config file given as the argument or as --config (both: they must agree). */
function configArg(arg: string | undefined, flag: string | undefined): string | undefined {
  if (arg !== undefined && flag !== undefined && arg !== flag)
    throw new RaasError('config_invalid', `two configs: ${arg} and --config ${flag}; give one`);
  return arg ?? flag;
}

/** --metrics-port: an integer 0..65535 (0 picks a free port). */
function metricsPort(v: string): number {
  const n = Number(v);
  if (!/^\d+$/.test(v.trim()) || !Number.isInteger(n) || n > 65535)
    throw new RaasError('config_invalid', `--metrics-port: expected a port number 0..65535, got "${v}"`);
  return n;
}
