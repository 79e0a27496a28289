import type { PolicyOptions, SimPolicy } from '../policy.js';
import { readRows, toTaskRows, type TaskRow } from './rows.js';
import { HarnessPolicy } from './harness.js';
import { ScriptedPolicy } from './scripted.js';
import { codePlan, customPlan, mathPlan, swePlan } from './tasks.js';
import type { TaskScript } from './custom.js';

/**
 * Default Beta shape: uniform. With the snapping in successProbability, ~8% of instances are never
 * and ~8% always solved, and a group of 4 is all-equal (filtered by DAPO) 40% of the time.
 */
export const DEFAULT_ALPHA = 1;
export const DEFAULT_BETA = 1;

/**
 * Loads the scripted policies for the given dataset files (JSONL or Parquet rows, plain or veRL
 * form): math, code and swe, and the rows a TaskScript (`scripts`, from `sim.policies` modules) or
 * a row's own `sim` field plays. Each policy recognises its rows' instances in a prompt and plays a
 * scripted rollout that ends right with the instance's seeded probability.
 */
export async function loadPolicies(
  datasetPaths: string[],
  opts: PolicyOptions & { harnesses?: boolean },
  scripts: ReadonlyArray<{ script: TaskScript; from: string }> = [],
): Promise<SimPolicy[]> {
  const raws = await Promise.all(datasetPaths.map(readRows));
  const raw = { rows: raws.flatMap((r) => r.rows), where: raws.flatMap((r) => r.where) };
  const rows = toTaskRows(raw, { seed: opts.seed, alpha: opts.alpha ?? DEFAULT_ALPHA, beta: opts.beta ?? DEFAULT_BETA, scripts });
  // Asked first: an agent harness's prompt (its own tool schema) holds the same problem text the task policies match.
  return [...(opts.harnesses && rows.length ? [new HarnessPolicy(rows)] : []), ...policiesFor(rows)];
}

/** The policies over already-parsed rows (one per task that has rows). */
export function policiesFor(rows: TaskRow[]): SimPolicy[] {
  const out: SimPolicy[] = [];
  const math = rows.filter((r): r is Extract<TaskRow, { task: 'math' }> => r.task === 'math');
  const code = rows.filter((r): r is Extract<TaskRow, { task: 'code' }> => r.task === 'code');
  const swe = rows.filter((r): r is Extract<TaskRow, { task: 'swe' }> => r.task === 'swe');
  const custom = rows.filter((r): r is Extract<TaskRow, { task: 'custom' }> => r.task === 'custom');
  // Custom scripts first: a row with its own script is played by it, whatever its task.
  if (custom.length) out.push(new ScriptedPolicy({ name: 'custom', rows: custom, variants: 1, plan: customPlan }));
  if (math.length) out.push(new ScriptedPolicy({ name: 'math', rows: math, variants: 2, plan: mathPlan }));
  if (code.length) out.push(new ScriptedPolicy({ name: 'code', rows: code, variants: 2, plan: codePlan }));
  if (swe.length) out.push(new ScriptedPolicy({ name: 'swe', rows: swe, variants: 2, plan: swePlan }));
  return out;
}
