import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { asyncBufferFromFile, parquetReadObjects } from 'hyparquet';
import type { DatasetConfig } from '../protocol/config-train.js';
import { RaasError } from '../protocol/errors.js';
import { rng, seedOf } from '../util/hash.js';

/** Where the next prompt comes from: the epoch and the position in that epoch's order. */
export const DatasetCursor = z.object({ epoch: z.number().int().nonnegative(), index: z.number().int().nonnegative() });
export type DatasetCursor = z.infer<typeof DatasetCursor>;

/** A dataset row as sent to the rollout server: data_source and instance_id always set. */
export type Prompt = Record<string, unknown> & { data_source: string; instance_id: string | number };

/**
 * A prompt dataset with a seeded order per epoch and a resumable cursor. Each epoch's order is a
 * Fisher-Yates shuffle seeded by (seed, epoch), so a cursor alone reproduces where a run stopped.
 */
export class PromptDataset {
  readonly rows: readonly Prompt[];
  private order: number[] = [];
  private orderEpoch = -1;
  cursor: DatasetCursor;

  constructor(
    rows: readonly Prompt[],
    private readonly cfg: Pick<DatasetConfig, 'shuffle' | 'epochs'>,
    private readonly seed: number,
    cursor?: DatasetCursor,
  ) {
    if (rows.length === 0)
      throw new RaasError('config_invalid', 'dataset.path: the dataset has no rows; expected at least one instance', { retryable: false });
    this.rows = rows;
    this.cursor = cursor ? { ...cursor } : { epoch: 0, index: 0 };
  }

  /** True when `epochs` passes have been served. */
  get exhausted(): boolean {
    return this.cfg.epochs !== undefined && this.cursor.epoch >= this.cfg.epochs;
  }

  /** The prompt next() would return, without advancing. */
  peek(): Prompt | undefined {
    if (this.exhausted) return undefined;
    if (this.orderEpoch !== this.cursor.epoch) this.buildOrder(this.cursor.epoch);
    return this.rows[this.order[this.cursor.index]];
  }

  /** The `k` prompts next() would return after the current one's turn, without advancing (fewer at the end). */
  upcoming(k: number): Prompt[] {
    const saved = { ...this.cursor };
    const out: Prompt[] = [];
    try {
      for (let i = 0; i < k; i++) {
        const p = this.next();
        if (!p) break;
        out.push(p);
      }
    } finally {
      this.cursor = saved;
    }
    return out;
  }

  /** The next prompt, or undefined when the configured epochs are exhausted. */
  next(): Prompt | undefined {
    const row = this.peek();
    if (!row) return undefined;
    this.cursor.index += 1;
    if (this.cursor.index >= this.rows.length) this.cursor = { epoch: this.cursor.epoch + 1, index: 0 };
    return row;
  }

  private buildOrder(epoch: number): void {
    const order = this.rows.map((_, i) => i);
    if (this.cfg.shuffle) {
      const rand = rng(seedOf('dataset', this.seed, epoch));
      for (let i = order.length - 1; i > 0; i--) {
        const j = Math.floor(rand() * (i + 1));
        [order[i], order[j]] = [order[j], order[i]];
      }
    }
    this.order = order;
    this.orderEpoch = epoch;
  }
}

/** Loads a JSONL or Parquet dataset and normalises its rows (see normaliseRow). */
export async function loadDataset(cfg: DatasetConfig, seed: number, cursor?: DatasetCursor): Promise<PromptDataset> {
  const rows = await readRows(cfg);
  const limited = cfg.limit ? rows.slice(0, cfg.limit) : rows;
  return new PromptDataset(
    limited.map((r, i) => normaliseRow(r, i, cfg)),
    cfg,
    seed,
    cursor,
  );
}

async function readRows(cfg: DatasetConfig): Promise<Record<string, unknown>[]> {
  const format = cfg.format ?? (/\.parquet$/i.test(cfg.path) ? 'parquet' : 'jsonl');
  try {
    if (format === 'parquet') {
      const file = await asyncBufferFromFile(cfg.path);
      return (await parquetReadObjects({ file })) as Record<string, unknown>[];
    }
    const text = await readFile(cfg.path, 'utf8');
    const out: Record<string, unknown>[] = [];
    text.split('\n').forEach((line, i) => {
      if (!line.trim()) return;
      try {
        out.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        throw new RaasError(
          'config_invalid',
          `dataset.path: ${cfg.path} line ${i + 1} is not JSON; expected one instance object per line`,
          { retryable: false },
        );
      }
    });
    return out;
  } catch (err) {
    if (err instanceof RaasError) throw err;
    throw new RaasError('config_invalid', `dataset.path: cannot read ${cfg.path} as ${format}: ${(err as Error).message}`, {
      retryable: false,
    });
  }
}

/**
 * Makes a row an instance: every field passes through (handlers read raas rows and veRL rows alike);
 * `data_source` is set (from `dataset.data_source`, the row, or its `task` alias) and `instance_id`
 * from the row, veRL's `extra_info.index`, or the row number.
 */
function normaliseRow(row: Record<string, unknown>, index: number, cfg: Pick<DatasetConfig, 'data_source' | 'path'>): Prompt {
  const out: Record<string, unknown> = { ...row };
  for (const [k, v] of Object.entries(out)) if (typeof v === 'bigint') out[k] = Number(v);
  const extra = (row.extra_info ?? {}) as Record<string, unknown>;
  const ds = cfg.data_source ?? (row.data_source as string | undefined) ?? (row.task as string | undefined);
  if (!ds)
    throw new RaasError(
      'config_invalid',
      `dataset.path: row ${index} of ${cfg.path} has no data_source; add one per row or set dataset.data_source`,
      { retryable: false },
    );
  out.data_source = ds;
  delete out.task;
  const id = row.instance_id ?? extra.index ?? index;
  out.instance_id = typeof id === 'bigint' ? Number(id) : (id as string | number);
  return out as Prompt;
}
