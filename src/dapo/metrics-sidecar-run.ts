import { createReadStream, existsSync } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { Batch } from '../protocol/batch.js';
import type { TrainConfig } from '../protocol/config-train.js';
import type { SidecarBackend, SidecarCoordinator, SidecarLog } from '../sidecar/types.js';
import type { PromptRecord } from './history.js';
import { MetricsLog } from './metrics-log.js';
import { stepRecord } from './metrics.js';
import { decorate } from './metrics-sidecar.js';
import { RunWriter, summarise, type StepSummary } from './run-writer.js';

/** Where and what the sidecar writes. */
export interface SidecarOutputs {
  /** `<output_dir>/<name>/`. */
  dir: string;
  /** Also append every batch to batches.jsonl (what `raas show` reads); off by default, a trainer has the batch. */
  keepBatches: boolean;
  log: SidecarLog;
  clock?: () => number;
}

/**
 * `raas sidecar`'s run directory, as `raas train` writes it: `metrics.jsonl` (one record per batch
 * handed to the trainer), `summary.json` and `plot.svg` (rewritten after each batch), `prompts.jsonl`,
 * `config.json`, and with `keepBatches` `batches.jsonl`. A new coordinator moves an earlier run's
 * files aside (`previous-<time>/`); a resumed one appends, dropping what the earlier process recorded
 * from the resumed step on. A write that fails is logged, never fails the trainer's request.
 */
export function withRunOutputs(backend: SidecarBackend, cfg: TrainConfig, opts: SidecarOutputs): SidecarBackend {
  const clock = opts.clock ?? (() => performance.now());
  const t0 = clock();
  const writer = new RunWriter(opts.dir);
  const metrics = new MetricsLog(writer.dir);
  let status: 'running' | 'finished' = 'running';
  let first = 0;

  const safely = async (what: string, f: () => Promise<unknown>): Promise<void> => {
    try {
      await f();
    } catch (err) {
      opts.log.warn(`run outputs: could not write ${what} in ${writer.dir}: ${(err as Error).message}`);
    }
  };
  const summary = (c: SidecarCoordinator): Record<string, unknown> => {
    const st = c.status() as { policy_version?: number; totals?: Record<string, number> };
    const t = st.totals ?? {};
    return {
      name: cfg.name,
      run_dir: writer.dir,
      source: 'raas sidecar',
      status,
      steps_done: writer.steps.length,
      n: cfg.n,
      batch_size: cfg.batch_size,
      mode: cfg.mode,
      max_staleness: cfg.max_staleness,
      seed: cfg.seed,
      policy_version: st.policy_version,
      wall_s: (clock() - t0) / 1000,
      totals: t,
      waste_fraction: t.tokens_generated ? (t.tokens_wasted ?? 0) / t.tokens_generated : 0,
      first_mean_reward: writer.steps[0]?.mean_reward,
      last_mean_reward: writer.steps.at(-1)?.mean_reward,
    };
  };
  const record = async (c: SidecarCoordinator, b: Batch): Promise<void> => {
    await safely('the batch', async () => {
      if (opts.keepBatches) await writer.appendBatch(b);
      else writer.steps.push(summarise(b));
      await metrics.append(stepRecord(b, (clock() - t0) / 1000));
      await writer.writeSummary(summary(c), 'raas sidecar');
      const history = (c as Partial<{ promptHistory(): PromptRecord[] }>).promptHistory?.();
      if (history) await writer.writePrompts(history);
    });
  };
  const wrap = (c: SidecarCoordinator): SidecarCoordinator =>
    decorate(c, {
      nextBatch: async (o) => {
        const b = await c.nextBatch(o);
        await record(c, b);
        return b;
      },
      close: async (o) => {
        await c.close(o);
        status = 'finished';
        await safely('summary.json', () => writer.writeSummary(summary(c), 'raas sidecar'));
      },
    });

  return {
    info: () => backend.info(),
    start: async (signal) => {
      const c = await backend.start(signal);
      await safely('the run directory', async () => {
        const moved = await writer.open();
        if (moved) opts.log.info(`the outputs of the earlier run "${cfg.name}" were moved to ${moved}`);
        await writer.writeConfig(cfg);
      });
      opts.log.info(`run outputs (metrics.jsonl, summary.json, plot.svg) in ${writer.dir}`);
      return wrap(c);
    },
    resume: async (state, signal) => {
      const c = await backend.resume(state, signal);
      first = typeof state.step === 'number' ? state.step : 0;
      await safely('the run directory', async () => {
        await mkdir(writer.dir, { recursive: true });
        await metrics.keepSteps(first);
        writer.steps.push(...(await summaryRows(writer.dir)).filter((r) => r.step < first));
        if (opts.keepBatches) await keepBatchLines(path.join(writer.dir, 'batches.jsonl'), first);
        await writer.writeConfig(cfg);
      });
      opts.log.info(`run outputs appended from step ${first} in ${writer.dir}`);
      return wrap(c);
    },
    eval: (o) => backend.eval(o),
  };
}

/** Rewrites batches.jsonl with the batches of steps before `step` (a resumed coordinator hands the rest over again). */
async function keepBatchLines(file: string, step: number): Promise<void> {
  if (!existsSync(file)) return;
  const kept: string[] = [];
  for await (const line of createInterface({ input: createReadStream(file), crlfDelay: Number.POSITIVE_INFINITY })) {
    // Batches are written with `step` first (src/dapo/core.ts builds them so).
    const m = /^\{"step":(\d+)/.exec(line);
    if (m && Number(m[1]) < step) kept.push(line);
  }
  await writeFile(`${file}.tmp-${process.pid}`, kept.map((l) => `${l}\n`).join(''));
  await rename(`${file}.tmp-${process.pid}`, file);
}

/** The per-step rows of an earlier summary.json (none when there is none). */
async function summaryRows(dir: string): Promise<StepSummary[]> {
  try {
    return (JSON.parse(await readFile(path.join(dir, 'summary.json'), 'utf8')) as { steps?: StepSummary[] }).steps ?? [];
  } catch {
    return [];
  }
}
