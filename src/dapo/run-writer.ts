import { existsSync } from 'node:fs';
import { appendFile, mkdir, readFile, readdir, rename, rm, stat, truncate, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Batch } from '../protocol/batch.js';
import { RaasError } from '../protocol/errors.js';
import type { TrainConfig } from '../protocol/config-train.js';
import { TrainCheckpoint } from './checkpoint.js';
import type { EndedGroupLine } from './group.js';
import type { PromptRecord } from './history.js';
import { runPlotSvg } from './plot-run.js';

/** What a run writes into its directory (moved aside, together, when the name is reused). */
const OUTPUTS = [
  'batches',
  'batches.jsonl',
  'summary.json',
  'plot.svg',
  'checkpoint.json',
  'config.json',
  'metrics.jsonl',
  'prompts.jsonl',
  'groups.jsonl',
];

/** Writes a file whole or not at all: a temporary file renamed over the target (a kill never leaves half a file). */
async function writeAtomic(file: string, data: string, mode?: number): Promise<void> {
  const tmp = `${file}.tmp-${process.pid}`;
  await writeFile(tmp, data, mode === undefined ? undefined : { mode });
  await rename(tmp, file);
}

/** Reads `runs/<name>/checkpoint.json`; errors name the file and what to do. */
export async function readTrainCheckpoint(dir: string): Promise<TrainCheckpoint> {
  const file = path.join(dir, 'checkpoint.json');
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(file, 'utf8'));
  } catch (err) {
    const missing = (err as NodeJS.ErrnoException).code === 'ENOENT';
    throw new RaasError(
      'config_invalid',
      missing
        ? `--resume ${dir}: no checkpoint.json there; raas train writes it after the first finished step (start the run without --resume)`
        : `--resume ${dir}: checkpoint.json is not JSON (${(err as Error).message})`,
      { retryable: false },
    );
  }
  const r = TrainCheckpoint.safeParse(raw);
  if (!r.success) {
    const i = r.error.issues[0]!;
    throw new RaasError('config_invalid', `--resume ${dir}: checkpoint.json: key "${i.path.join('.')}": ${i.message}`, {
      retryable: false,
    });
  }
  return r.data;
}

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
    step: b.step,
    policy_version: b.policy_version,
    wall_s: s.wall_s,
    groups: b.groups.length,
    accepted: s.accepted,
    filtered: s.filtered,
    cancelled: s.cancelled,
    carried_over: s.carried_over,
    mean_reward: s.mean_reward ?? 0,
    batch_mean_reward: s.batch_mean_reward ?? 0,
    informative_groups_per_s: s.informative_groups_per_s ?? 0,
    tokens_per_s: s.tokens_generated / Math.max(s.wall_s, 1e-9),
    worker_utilization: s.worker_utilization,
    staleness_mean: s.staleness_mean ?? 0,
    staleness_max: s.staleness_max ?? 0,
    tokens_generated: s.tokens_generated,
    tokens_wasted: s.tokens_wasted ?? 0,
  };
}

/**
 * Writes a run's outputs under `runs/<name>/`: `batches.jsonl` (one batch per line),
 * `batches/step-<k>.json` (the file a trainer command reads), `summary.json` and `plot.svg`
 * (panels per step, src/dapo/plot-run.ts), rewritten after each step; `metrics.jsonl` is
 * appended by MetricsLog (src/dapo/metrics-log.ts).
 */
export class RunWriter {
  readonly dir: string;
  readonly steps: StepSummary[] = [];
  /** Size of batches.jsonl after the last batch written. */
  bytes = 0;

  /** `runs/<name>/` of `outputDir` and `name`, or the directory itself when `name` is undefined (a resume). */
  constructor(outputDir: string, name?: string) {
    this.dir = name === undefined ? path.resolve(outputDir) : path.resolve(outputDir, name);
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

  /**
   * Reopens the run directory of a checkpoint to append to it (nothing is moved aside): what a step
   * after the checkpoint had begun to write is cut off (batches.jsonl back to the checkpoint's size,
   * later step files removed), since that step runs again; the finished steps' rows come back from
   * summary.json (or their step files).
   */
  async reopen(ck: TrainCheckpoint): Promise<{ dropped_steps: number[] }> {
    const jsonl = path.join(this.dir, 'batches.jsonl');
    const size = existsSync(jsonl) ? (await stat(jsonl)).size : 0;
    if (size < ck.batches_jsonl_bytes) {
      throw new RaasError(
        'config_invalid',
        `--resume ${this.dir}: batches.jsonl has ${size} bytes but the checkpoint recorded ${ck.batches_jsonl_bytes} after step ${ck.steps_done - 1}; the run directory was changed by hand`,
        { retryable: false },
      );
    }
    if (size > ck.batches_jsonl_bytes) await truncate(jsonl, ck.batches_jsonl_bytes);
    this.bytes = ck.batches_jsonl_bytes;
    await mkdir(path.join(this.dir, 'batches'), { recursive: true });
    const dropped: number[] = [];
    for (const f of await readdir(path.join(this.dir, 'batches'))) {
      const m = /^step-(\d+)\.json$/.exec(f);
      if (m && Number(m[1]) >= ck.steps_done) {
        dropped.push(Number(m[1]));
        await rm(path.join(this.dir, 'batches', f), { force: true });
      }
    }
    await keepLinesBefore(path.join(this.dir, 'groups.jsonl'), ck.steps_done);
    let rows: StepSummary[] = [];
    try {
      rows = (JSON.parse(await readFile(path.join(this.dir, 'summary.json'), 'utf8')) as { steps?: StepSummary[] }).steps ?? [];
    } catch {
      // rebuilt from the step files below
    }
    const byStep = new Map(rows.filter((r) => r.step < ck.steps_done).map((r) => [r.step, r]));
    for (let k = 0; k < ck.steps_done; k++) {
      const row = byStep.get(k) ?? summarise(JSON.parse(await readFile(this.batchPath(k), 'utf8')) as Batch);
      this.steps.push(row);
    }
    return { dropped_steps: dropped.sort((a, b) => a - b) };
  }

  /** The resolved config of the run (`config.json`, owner-only: it may hold server tokens): what --resume starts from. */
  async writeConfig(cfg: TrainConfig): Promise<void> {
    await writeAtomic(path.join(this.dir, 'config.json'), JSON.stringify(cfg, null, 2) + '\n', 0o600);
  }

  /** `checkpoint.json`, atomically. */
  async writeCheckpoint(ck: TrainCheckpoint): Promise<void> {
    await writeAtomic(path.join(this.dir, 'checkpoint.json'), JSON.stringify(ck) + '\n');
  }

  batchPath(step: number): string {
    return path.join(this.dir, 'batches', `step-${step}.json`);
  }

  /** Appends the batch and writes its step file; returns the step file's path. */
  async writeBatch(b: Batch): Promise<string> {
    const line = await this.appendBatch(b);
    const p = this.batchPath(b.step);
    await writeAtomic(p, line);
    return p;
  }

  /** Appends the batch to batches.jsonl (no step file) and its row to the summary; returns the line. */
  async appendBatch(b: Batch): Promise<string> {
    const line = JSON.stringify(b);
    await appendFile(path.join(this.dir, 'batches.jsonl'), line + '\n');
    this.bytes += Buffer.byteLength(line) + 1;
    this.steps.push(summarise(b));
    return line;
  }

  /** Appends lines to `groups.jsonl` (the groups that did not reach a batch, for raas view). */
  async appendGroups(lines: readonly EndedGroupLine[]): Promise<void> {
    if (lines.length > 0) await appendFile(path.join(this.dir, 'groups.jsonl'), lines.map((l) => JSON.stringify(l) + '\n').join(''));
  }

  /** `prompts.jsonl`, atomically: one line per prompt with every group's rewards, its submissions and skips. */
  async writePrompts(records: readonly PromptRecord[]): Promise<void> {
    await writePromptsJsonl(this.dir, records);
  }

  /** Writes summary.json and plot.svg from the steps so far plus run-level facts. */
  async writeSummary(extra: Record<string, unknown>, command = 'raas train'): Promise<void> {
    const summary = { ...extra, steps: this.steps };
    await writeAtomic(path.join(this.dir, 'summary.json'), JSON.stringify(summary, null, 2) + '\n');
    // Panels per step: reward, informative groups/s, filtered share, waste, staleness, step time.
    await writeAtomic(path.join(this.dir, 'plot.svg'), runPlotSvg(`${command} ${path.basename(this.dir)}: per step`, this.steps));
  }
}

/** The resolved config a run saved (`config.json`), for `raas train --resume <dir>` without a config file. */
export async function readRunConfig(dir: string): Promise<unknown> {
  const file = path.join(dir, 'config.json');
  try {
    return JSON.parse(await readFile(file, 'utf8'));
  } catch (err) {
    throw new RaasError(
      'config_invalid',
      `--resume ${dir}: cannot read config.json (${(err as Error).message}); give the run's config file as well: raas train <config> --resume ${dir}`,
      { retryable: false },
    );
  }
}

/**
 * Writes `<dir>/prompts.jsonl` atomically: one JSON line per prompt (`data_source`, `instance_id`,
 * `submitted`, `skips`, `skip_streak`, `last_skip_step`, `groups: [{step, version, rewards, errors,
 * verdict}]`). The sidecar's run outputs write it the same way.
 */
async function writePromptsJsonl(dir: string, records: readonly PromptRecord[]): Promise<void> {
  await writeAtomic(path.join(dir, 'prompts.jsonl'), records.map((r) => JSON.stringify(r) + '\n').join(''));
}

/** Keeps the lines of a JSON-lines file whose `step` is below `steps` (a resumed run writes the later steps again). */
async function keepLinesBefore(file: string, steps: number): Promise<void> {
  if (!existsSync(file)) return;
  const kept = (await readFile(file, 'utf8')).split('\n').filter((l) => {
    try {
      return l.trim() !== '' && (JSON.parse(l) as { step?: number }).step! < steps;
    } catch {
      return false; // a line cut by a kill
    }
  });
  await writeAtomic(file, kept.map((l) => l + '\n').join(''));
}
