import { existsSync } from 'node:fs';
import { appendFile, mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Batch } from '../protocol/batch.js';
import { lineChartSvg } from './plot.js';

/** What a run writes into its directory (moved aside, together, when the name is reused). */
const OUTPUTS = ['batches', 'batches.jsonl', 'summary.json', 'plot.svg'];

/** One row of summary.json per step. */
export interface StepSummary {
  step: number;
  policy_version: number;
  wall_s: number;
  groups: number;
  accepted: number;
  filtered: number;
  cancelled: number;
  carried_over: number;
  mean_reward: number;
  batch_mean_reward: number;
  informative_groups_per_s: number;
  tokens_per_s: number;
  worker_utilization: number;
  staleness_mean: number;
  staleness_max: number;
  tokens_generated: number;
  tokens_wasted: number;
}

/** Summary row of a batch (also the CLI's per-step line). */
export function summarise(b: Batch): StepSummary {
  const s = b.stats as Batch['stats'] & Record<string, number>;
  return {
    step: b.step, policy_version: b.policy_version, wall_s: s.wall_s, groups: b.groups.length, accepted: s.accepted, filtered: s.filtered,
    cancelled: s.cancelled, carried_over: s.carried_over, mean_reward: s.mean_reward ?? 0, batch_mean_reward: s.batch_mean_reward ?? 0,
    informative_groups_per_s: s.informative_groups_per_s ?? 0, tokens_per_s: s.tokens_generated / Math.max(s.wall_s, 1e-9),
    worker_utilization: s.worker_utilization, staleness_mean: s.staleness_mean ?? 0, staleness_max: s.staleness_max ?? 0,
    tokens_generated: s.tokens_generated, tokens_wasted: s.tokens_wasted ?? 0,
  };
}

/**
 * Writes a run's outputs under `runs/<name>/`: `batches.jsonl` (one batch per line),
 * `batches/step-<k>.json` (the file a trainer command reads), `summary.json` and `plot.svg`
 * (mean reward and informative groups/s per step), rewritten after each step.
 */
export class RunWriter {
  readonly dir: string;
  readonly steps: StepSummary[] = [];

  constructor(outputDir: string, name: string) {
    this.dir = path.resolve(outputDir, name);
  }

  /**
   * Creates the run directory. The outputs of an earlier run of the same name are moved aside into
   * `previous-<time>/` (never deleted); returns that directory, if any. Call it once the run has
   * started, so a run that fails at start leaves the earlier outputs where they were.
   */
  async open(now: Date = new Date()): Promise<string | undefined> {
    await mkdir(this.dir, { recursive: true });
    const present = OUTPUTS.filter((f) => existsSync(path.join(this.dir, f)));
    let moved: string | undefined;
    if (present.length) {
      moved = path.join(this.dir, `previous-${now.toISOString().replace(/[:.]/g, '-')}`);
      await mkdir(moved, { recursive: true });
      for (const f of present) await rename(path.join(this.dir, f), path.join(moved, f));
    }
    await mkdir(path.join(this.dir, 'batches'), { recursive: true });
    return moved;
  }

  batchPath(step: number): string {
    return path.join(this.dir, 'batches', `step-${step}.json`);
  }

  /** Appends the batch and writes its step file; returns the step file's path. */
  async writeBatch(b: Batch): Promise<string> {
    const line = JSON.stringify(b);
    await appendFile(path.join(this.dir, 'batches.jsonl'), line + '\n');
    const p = this.batchPath(b.step);
    await writeFile(p, line);
    this.steps.push(summarise(b));
    return p;
  }

  /** Writes summary.json and plot.svg from the steps so far plus run-level facts. */
  async writeSummary(extra: Record<string, unknown>): Promise<void> {
    const summary = { ...extra, steps: this.steps };
    await writeFile(path.join(this.dir, 'summary.json'), JSON.stringify(summary, null, 2) + '\n');
    const svg = lineChartSvg(`${path.basename(this.dir)}: mean reward and throughput per step`, 'step', [
      { name: 'mean reward (all completed rollouts)', color: '#1f77b4', values: this.steps.map((s) => s.mean_reward) },
      { name: 'informative groups/s', color: '#d62728', values: this.steps.map((s) => s.informative_groups_per_s) },
    ]);
    await writeFile(path.join(this.dir, 'plot.svg'), svg);
  }
}
