import { readFile } from 'node:fs/promises';
import { asyncBufferFromFile, parquetReadObjects } from 'hyparquet';
import { RaasError } from '../../protocol/errors.js';
import { CodeInstance, MathInstance, SweInstance, normaliseRow, taskOf } from '../../protocol/tasks.js';
import { rng, seedOf } from '../../util/hash.js';
import { customScript, type CustomScript, type TaskScript } from './custom.js';

/**
 * A dataset row a policy can script: its task, parsed instance, and per-instance success
 * probability; `custom` rows carry their own script (a `sim` field or a `sim.policies` module).
 */
export type TaskRow =
  | { task: 'math'; key: string; instance: MathInstance; p: number }
  | { task: 'code'; key: string; instance: CodeInstance; p: number }
  | { task: 'swe'; key: string; instance: SweInstance; p: number }
  | { task: 'custom'; key: string; script: CustomScript; p: number };

/** Raw rows and where each came from (`file line k`), for messages. */
export interface RawRows {
  rows: unknown[];
  where: string[];
}

/** Reads a JSONL or Parquet file into raw rows. */
export async function readRows(path: string): Promise<RawRows> {
  try {
    if (/\.parquet$/i.test(path)) {
      const rows: unknown[] = await parquetReadObjects({ file: await asyncBufferFromFile(path) });
      return { rows, where: rows.map((_, i) => `${path} row ${i}`) };
    }
    const text = await readFile(path, 'utf8');
    const out: RawRows = { rows: [], where: [] };
    text.split('\n').forEach((line, i) => {
      if (!line.trim()) return;
      try {
        out.rows.push(JSON.parse(line));
        out.where.push(`${path} line ${i + 1}`);
      } catch {
        throw new RaasError('config_invalid', `sim datasets: ${path} line ${i + 1} is not JSON; expected one JSON object per line`);
      }
    });
    return out;
  } catch (err) {
    if (err instanceof RaasError) throw err;
    throw new RaasError('config_invalid', `sim datasets: cannot read ${path}: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * Parses the rows the simulator can play: a row with its own `sim` script or a data_source a
 * `sim.policies` script plays (custom), else math / code / swe rows; rows of other tasks, or that
 * fail their schema, are skipped.
 */
export function toTaskRows(
  input: RawRows | unknown[],
  opts: { seed: number; alpha: number; beta: number; scripts?: ReadonlyArray<{ script: TaskScript; from: string }> },
): TaskRow[] {
  const raw: RawRows = Array.isArray(input) ? { rows: input, where: [] } : input;
  const out: TaskRow[] = [];
  raw.rows.forEach((r, i) => {
    const row = normaliseRow(r) as Record<string, unknown>;
    if (!row || typeof row !== 'object' || Array.isArray(row)) return;
    const script = customScript(row, opts.scripts ?? [], raw.where[i] ?? `row ${i}`);
    if (script) {
      const key = `${String(row.data_source ?? row.task ?? 'custom')}:${String(row.instance_id ?? script.match.join('\u0000'))}`;
      const p = successProbability(seedOf(opts.seed, 'instance-p', 'custom', key), opts.alpha, opts.beta);
      out.push({ task: 'custom', key, script, p });
      return;
    }
    const task = taskOf(row.data_source ?? row.task);
    const schema = task === 'math' ? MathInstance : task === 'code' ? CodeInstance : task === 'swe' ? SweInstance : undefined;
    if (!task || !schema) return;
    const parsed = schema.safeParse(row);
    if (!parsed.success) return;
    const inst = parsed.data as MathInstance & CodeInstance & SweInstance;
    const key = String(inst.instance_id ?? (task === 'swe' ? inst.problem_statement : inst.problem));
    const p = successProbability(seedOf(opts.seed, 'instance-p', task, key), opts.alpha, opts.beta);
    out.push({ task, key, instance: inst, p } as TaskRow);
  });
  return out;
}

/**
 * Per-instance success probability: a seeded Beta(alpha, beta) draw, snapped to 0 below 0.08 and to
 * 1 above 0.92 so that some instances are never and some always solved (8% at each end for the
 * default uniform Beta(1, 1)).
 */
export function successProbability(seed: number, alpha: number, beta: number): number {
  const r = rng(seed);
  const x = gamma(alpha, r);
  const y = gamma(beta, r);
  const p = x / (x + y);
  if (!(p >= 0.08)) return 0;
  if (p > 0.92) return 1;
  return p;
}

/** Marsaglia–Tsang gamma sampler (with the a < 1 boost), driven by a seeded uniform source. */
function gamma(a: number, r: () => number): number {
  if (a < 1) return gamma(a + 1, r) * Math.pow(r() || 1e-12, 1 / a);
  const d = a - 1 / 3;
  const c = 1 / Math.sqrt(9 * d);
  for (;;) {
    let x: number;
    let v: number;
    do {
      x = normal(r);
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const u = r();
    if (u < 1 - 0.0331 * x ** 4 || Math.log(u) < 0.5 * x * x + d * (1 - v + Math.log(v))) return d * v;
  }
}

function normal(r: () => number): number {
  const u = r() || 1e-12;
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * r());
}
