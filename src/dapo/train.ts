import cliProgress from 'cli-progress';
import type { Batch } from '../protocol/batch.js';
import type { TrainConfig } from '../protocol/config-train.js';
import { Coordinator } from './coordinator.js';
import { RunWriter, summarise, type StepSummary } from './run-writer.js';
import { renderCommand, runTrainerCommand } from './trainer-command.js';

/** Options of runTraining (the CLI passes stderr and its Ctrl-C signal). */
export interface TrainOptions {
  signal?: AbortSignal;
  /** Progress bars and summary rows go here (default: nowhere). */
  stderr?: NodeJS.WriteStream;
  /** Called with each batch after its files are written. */
  onBatch?: (b: Batch, path: string) => void;
}

/** What a finished run reports (also written as summary.json). */
export interface TrainSummary {
  name: string;
  run_dir: string;
  steps: StepSummary[];
  [k: string]: unknown;
}

const row = (s: StepSummary): string =>
  `step ${String(s.step).padStart(3)} | v${s.policy_version} | ${s.wall_s.toFixed(2)}s | groups ${s.groups} (filtered ${s.filtered}, cancelled ${s.cancelled}, carried ${s.carried_over}) | ` +
  `reward ${s.mean_reward.toFixed(3)} | ${s.informative_groups_per_s.toFixed(2)} groups/s | util ${(s.worker_utilization * 100).toFixed(0)}% | staleness ${s.staleness_mean.toFixed(2)}/${s.staleness_max}`;

/**
 * `raas train`: runs `steps` iterations. Each step waits for the batch (progress bar: accepted /
 * target groups, jobs in flight, filtered), writes its files, runs `trainer.command` on it and
 * applies the update its last stdout line asks for; without a command it calls updateWeights itself
 * (`trainer.update_weights`). A failing command or an abort stops the run after cancelling
 * in-flight jobs.
 */
export async function runTraining(cfg: TrainConfig, opts: TrainOptions = {}): Promise<TrainSummary> {
  const writer = new RunWriter(cfg.output_dir, cfg.name);
  const coord = new Coordinator(cfg);
  const err = opts.stderr;
  const t0 = performance.now();
  const summary = (): TrainSummary => {
    const st = coord.status();
    const t = st.totals;
    return {
      name: cfg.name, run_dir: writer.dir, mode: cfg.mode, carry_over: cfg.carry_over, max_staleness: cfg.max_staleness, n: cfg.n, batch_size: cfg.batch_size,
      seed: cfg.seed, policy_version: st.policy_version, wall_s: (performance.now() - t0) / 1000, totals: t,
      waste_fraction: t.tokens_generated ? t.tokens_wasted / t.tokens_generated : 0, leftovers: coord.leftovers(),
      first_mean_reward: writer.steps[0]?.mean_reward, last_mean_reward: writer.steps.at(-1)?.mean_reward, steps: writer.steps,
    };
  };
  try {
    await coord.start();
    // Only a run that started touches the run directory; an earlier run's outputs are kept aside.
    const moved = await writer.open();
    if (moved) err?.write(`raas: the outputs of the earlier run "${cfg.name}" were moved to ${moved}\n`);
    for (let step = 0; step < cfg.steps; step++) {
      const batch = await withProgress(coord, cfg, step, err, opts.signal);
      const p = await writer.writeBatch(batch);
      err?.write(row(summarise(batch)) + '\n');
      opts.onBatch?.(batch, p);
      const last = step === cfg.steps - 1;
      if (cfg.trainer.command) {
        const cmd = renderCommand(cfg.trainer.command, { batch_path: p, step: batch.step, run_dir: writer.dir });
        const r = await runTrainerCommand(cmd, { cwd: cfg.trainer.cwd, env: cfg.trainer.env, signal: opts.signal });
        if (!last) await coord.updateWeights(r.update);
      } else if (cfg.trainer.update_weights && !last) {
        await coord.updateWeights({});
      }
      await writer.writeSummary(summary());
    }
    const s = summary();
    await writer.writeSummary(s);
    return s;
  } finally {
    await coord.close();
  }
}

/** Waits for the step's batch with a progress bar on stderr (when it is a terminal). */
async function withProgress(coord: Coordinator, cfg: TrainConfig, step: number, err: NodeJS.WriteStream | undefined, signal?: AbortSignal): Promise<Batch> {
  if (!err?.isTTY) return coord.nextBatch({ signal });
  const bar = new cliProgress.SingleBar(
    { stream: err, format: `step ${step} [{bar}] {value}/{total} groups | in flight {inflight} jobs | filtered {filtered} | {elapsed}s`, hideCursor: true, clearOnComplete: true },
    cliProgress.Presets.shades_classic,
  );
  const st = coord.status();
  bar.start(cfg.batch_size, Math.min(st.buffered_groups, cfg.batch_size), { inflight: st.running_jobs, filtered: 0, elapsed: '0.0' });
  const timer = setInterval(() => {
    const s = coord.status();
    bar.update(Math.min(s.buffered_groups, cfg.batch_size), { inflight: s.running_jobs, filtered: s.window.filtered, elapsed: s.window.elapsed_s.toFixed(1) });
  }, 200);
  try {
    return await coord.nextBatch({ signal });
  } finally {
    clearInterval(timer);
    bar.stop();
  }
}
