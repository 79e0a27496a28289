import path from 'node:path';
import cliProgress from 'cli-progress';
import type { Batch } from '../protocol/batch.js';
import type { TrainConfig } from '../protocol/config-train.js';
import type { TrainCheckpoint } from './checkpoint.js';
import { Coordinator } from './coordinator.js';
import type { EndedGroupLine } from './group.js';
import { RunWriter, type StepSummary } from './run-writer.js';
import { stepLine, stepRecord, type CoordinatorMetrics } from './metrics.js';
import { MetricsLog } from './metrics-log.js';
import { renderCommand, runTrainerCommand } from './trainer-command.js';

/** Options of runTraining (the CLI passes stderr and its Ctrl-C signal). */
export interface TrainOptions {
  signal?: AbortSignal;
  /** Progress bars and summary rows go here (default: nowhere). */
  stderr?: NodeJS.WriteStream;
  /** Called with each batch after its files are written. */
  onBatch?: (b: Batch, path: string) => void;
  /** Continue the run in `dir` from its checkpoint (`raas train --resume <dir>`), appending to its outputs. */
  resume?: { dir: string; checkpoint: TrainCheckpoint };
  /** Prometheus metrics of the run (`--metrics-port`): live gauges read the coordinator, each step is observed. */
  metrics?: CoordinatorMetrics;
  /** When stderr is not a terminal: a progress line every this many seconds while a step waits (default 30; 0: none). */
  progressIntervalS?: number;
}

/** How a run ended (summary.json `status`); `running` while it runs. */
type RunStatus = 'running' | 'finished' | 'interrupted' | 'failed';

/** What a finished run reports (also written as summary.json). */
export interface TrainSummary {
  name: string;
  run_dir: string;
  status: RunStatus;
  steps_asked: number;
  steps_done: number;
  steps: StepSummary[];
  [k: string]: unknown;
}

const addTotals = (a: Record<string, number>, b: Record<string, number>): Record<string, number> => {
  const out = { ...a };
  for (const [k, v] of Object.entries(b)) out[k] = (out[k] ?? 0) + v;
  return out;
};

/**
 * `raas train`: runs `steps` iterations. Each step waits for the batch (progress bar: accepted /
 * target groups, jobs in flight, filtered), writes its files, runs `trainer.command` on it and
 * applies the update its last stdout line asks for; without a command it calls updateWeights itself
 * (`trainer.update_weights`). After every step `checkpoint.json` is written atomically, so
 * `opts.resume` (`--resume`) continues at the next step and re-attaches to the jobs in flight. A
 * finished run cancels what still runs; an interrupted (abort) or failed one leaves its jobs running
 * on the servers for the resume and says so in summary.json's `status`.
 */
export async function runTraining(cfg: TrainConfig, opts: TrainOptions = {}): Promise<TrainSummary> {
  const ck = opts.resume?.checkpoint;
  const writer = opts.resume ? new RunWriter(opts.resume.dir) : new RunWriter(cfg.output_dir, cfg.name);
  const coord = ck ? Coordinator.resume(cfg, ck.coordinator) : new Coordinator(cfg);
  const err = opts.stderr;
  const log = new MetricsLog(writer.dir);
  // Groups that leave without a batch go to groups.jsonl with the step that hands over next.
  const ended: EndedGroupLine[] = [];
  coord.onGroupEnd((line) => ended.push(line));
  opts.metrics?.setSource(() => coord.status());
  const t0 = performance.now();
  const earlierWall = ck?.wall_s ?? 0;
  const earlierTotals = ck?.totals ?? {};
  const resumes = ck ? ck.resumes + 1 : 0;
  let stepsDone = ck?.steps_done ?? 0;
  let status: RunStatus = 'running';
  const wall = (): number => earlierWall + (performance.now() - t0) / 1000;
  const totals = (): Record<string, number> => addTotals(earlierTotals, coord.status().totals as unknown as Record<string, number>);
  const summary = (): TrainSummary => {
    const st = coord.status();
    const t = totals();
    return {
      name: cfg.name,
      run_dir: writer.dir,
      status,
      steps_asked: cfg.steps,
      steps_done: stepsDone,
      resumes,
      mode: cfg.mode,
      carry_over: cfg.carry_over,
      max_staleness: cfg.max_staleness,
      n: cfg.n,
      batch_size: cfg.batch_size,
      seed: cfg.seed,
      selection: cfg.selection.mode,
      adaptive_n: cfg.selection.adaptive_n ?? null,
      policy_version: st.policy_version,
      wall_s: wall(),
      totals: t,
      prompts: coord.promptSummary(),
      waste_fraction: t.tokens_generated ? (t.tokens_wasted ?? 0) / t.tokens_generated : 0,
      leftovers: coord.leftovers(),
      first_mean_reward: writer.steps[0]?.mean_reward,
      last_mean_reward: writer.steps.at(-1)?.mean_reward,
      steps: writer.steps,
    };
  };
  /** Saves the coordinator's state as of `stepsDone` finished steps (skipped if it has handed over a later batch). */
  const checkpoint = async (): Promise<void> => {
    const state = coord.checkpoint();
    if (state.step !== stepsDone) return;
    await writer.writeCheckpoint({
      format: 'raas.train/1',
      steps_done: stepsDone,
      steps_asked: cfg.steps,
      batches_jsonl_bytes: writer.bytes,
      batch_files: writer.steps.map((s) => path.relative(writer.dir, writer.batchPath(s.step))),
      wall_s: wall(),
      resumes,
      totals: totals(),
      coordinator: state,
      saved_at: new Date().toISOString(),
    });
  };
  let opened = false;
  /** Waiting for a batch (the coordinator's state matches the finished steps) or training on one. */
  let waiting = true;
  try {
    await coord.start();
    // Only a run that started touches the run directory; an earlier run's outputs are kept aside.
    if (ck) {
      const { dropped_steps } = await writer.reopen(ck);
      await log.keepSteps(stepsDone);
      if (dropped_steps.length)
        err?.write(`raas: step ${dropped_steps.join(', ')} had not finished before the interruption; it runs again\n`);
      if (cfg.embedded !== false)
        err?.write('raas: embedded rollout servers do not outlive their process: the rollouts in flight at the checkpoint run again\n');
      err?.write(`raas: resuming "${cfg.name}" at step ${stepsDone} of ${cfg.steps} in ${writer.dir}\n`);
    } else {
      const moved = await writer.open();
      if (moved) err?.write(`raas: the outputs of the earlier run "${cfg.name}" were moved to ${moved}\n`);
    }
    opened = true;
    await writer.writeConfig(cfg);
    // A run killed during its first step can resume too.
    if (!ck) await checkpoint();
    for (let step = stepsDone; step < cfg.steps; step++) {
      waiting = true;
      const batch = await withProgress(coord, cfg, step, err, opts.signal, opts.progressIntervalS ?? 30);
      waiting = false;
      const p = await writer.writeBatch(batch);
      await writer.appendGroups(ended.splice(0));
      const rec = stepRecord(batch, wall());
      await log.append(rec);
      opts.metrics?.observe(rec);
      err?.write(stepLine(rec) + '\n');
      opts.onBatch?.(batch, p);
      const last = step === cfg.steps - 1;
      if (cfg.trainer.command) {
        const cmd = renderCommand(cfg.trainer.command, { batch_path: p, step: batch.step, run_dir: writer.dir });
        const r = await runTrainerCommand(cmd, { cwd: cfg.trainer.cwd, env: cfg.trainer.env, signal: opts.signal });
        if (!last) await coord.updateWeights(r.update);
      } else if (cfg.trainer.update_weights && !last) {
        await coord.updateWeights({});
      }
      stepsDone = step + 1;
      if (last) status = 'finished';
      await writer.writeSummary(summary());
      await writer.writePrompts(coord.promptHistory());
      await checkpoint();
      waiting = true;
    }
    status = 'finished';
    const s = summary();
    await writer.writeSummary(s);
    return s;
  } catch (e) {
    if (opened) {
      status = opts.signal?.aborted ? 'interrupted' : 'failed';
      // While waiting for a batch the state is consistent with the finished steps, and newer than the
      // last step's checkpoint (it knows the groups admitted since). Otherwise that checkpoint stays.
      if (waiting) await checkpoint().catch((x: unknown) => err?.write(`raas: could not write the checkpoint: ${(x as Error).message}\n`));
      const why = status === 'failed' ? { error: e instanceof Error ? e.message : String(e) } : {};
      await writer.writeSummary({ ...summary(), ...why }).catch(() => undefined);
      await writer.writePrompts(coord.promptHistory()).catch(() => undefined);
    }
    throw e;
  } finally {
    // Shutdown for a resume never cancels: the jobs in flight are re-attached by id.
    await coord.close({ cancel: status === 'finished' || !opened });
  }
}

/** One line of progress while a step waits (stderr not a terminal: logs, Slurm output files). */
function progressLine(step: number, batchSize: number, s: ReturnType<Coordinator['status']>): string {
  const w = s.window;
  const extra = (w.skipped ? `, ${w.skipped} skipped` : '') + (w.dropped_error ? `, ${w.dropped_error} dropped on error` : '');
  return `raas: step ${step}: ${Math.min(s.buffered_groups, batchSize)}/${batchSize} groups ready, ${w.accepted} accepted and ${w.filtered} filtered of ${w.submitted} submitted in this step${extra} | ${s.running_jobs} jobs in flight | ${w.elapsed_s.toFixed(1)} s`;
}

/** Waits for the step's batch with a progress bar on stderr (when it is a terminal), else a line every `intervalS`. */
async function withProgress(
  coord: Coordinator,
  cfg: TrainConfig,
  step: number,
  err: NodeJS.WriteStream | undefined,
  signal: AbortSignal | undefined,
  intervalS: number,
): Promise<Batch> {
  if (!err?.isTTY) {
    if (!err || !(intervalS > 0)) return coord.nextBatch({ signal });
    const timer = setInterval(() => err.write(progressLine(step, cfg.batch_size, coord.status()) + '\n'), intervalS * 1000);
    try {
      return await coord.nextBatch({ signal });
    } finally {
      clearInterval(timer);
    }
  }
  const bar = new cliProgress.SingleBar(
    {
      stream: err,
      format: `step ${step} [{bar}] {value}/{total} groups | in flight {inflight} jobs | filtered {filtered} | {elapsed}s`,
      hideCursor: true,
      clearOnComplete: true,
    },
    cliProgress.Presets.shades_classic,
  );
  const st = coord.status();
  bar.start(cfg.batch_size, Math.min(st.buffered_groups, cfg.batch_size), { inflight: st.running_jobs, filtered: 0, elapsed: '0.0' });
  const timer = setInterval(() => {
    const s = coord.status();
    bar.update(Math.min(s.buffered_groups, cfg.batch_size), {
      inflight: s.running_jobs,
      filtered: s.window.filtered,
      elapsed: s.window.elapsed_s.toFixed(1),
    });
  }, 200);
  try {
    return await coord.nextBatch({ signal });
  } finally {
    clearInterval(timer);
    bar.stop();
  }
}
