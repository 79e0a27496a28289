import { z } from 'zod';
import { RaasError } from '../../protocol/errors.js';

/**
 * One scripted turn of a task no built-in policy knows: some prose, then one tool call (`name`,
 * `arguments`), or prose alone (a final answer without a tool call).
 */
export interface ScriptStep {
  say?: string;
  name?: string;
  arguments?: Record<string, unknown>;
}

/**
 * How the simulated model plays the rows of a custom `data_source` (a `sim.policies` module's
 * default export, docs/tasks.md). The simulator finds a row in a prompt by the `match` texts (all
 * must appear in the first user message), then plays `right` with the row's seeded success
 * probability and `wrong` otherwise.
 */
export interface TaskScript<R = Record<string, unknown>> {
  /** The data sources this script plays, as the dataset rows write them. */
  data_source: string | string[];
  /** Text(s) of the row's prompt that identify it (the handler puts them into the first user message). */
  match(row: R): string | string[];
  /** The turns of a right answer. */
  right(row: R): ScriptStep[];
  /** The turns of a wrong answer; default: one turn that gives up without a tool call. */
  wrong?(row: R): ScriptStep[];
}

const Step = z.strictObject({
  say: z.string().optional(),
  name: z.string().min(1).optional(),
  arguments: z.record(z.string(), z.unknown()).optional(),
});
const Texts = z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]);

/**
 * A dataset row's own script, its `sim` field (a reference field: handlers never put it into a
 * prompt): `{match?, right, wrong?}` with steps as in ScriptStep. `match` defaults to the row's
 * `problem`, `problem_statement` or `question`.
 */
const RowScript = z.strictObject({
  match: Texts.optional(),
  right: z.array(Step).min(1),
  wrong: z.array(Step).min(1).optional(),
});

/** A custom row the simulator can play: the texts that find it, and its two scripts. */
export interface CustomScript {
  match: string[];
  right: ScriptStep[];
  wrong: ScriptStep[];
}

/** What a wrong rollout does when its script says nothing: give up, without a tool call. */
const GIVE_UP: ScriptStep[] = [{ say: 'I could not solve this task.' }];

const asList = (v: string | string[]): string[] => (Array.isArray(v) ? v : [v]);

/** The script of one row (its own `sim` field first, else a module's script for its data_source), or undefined. */
export function customScript(
  row: Record<string, unknown>,
  scripts: ReadonlyArray<{ script: TaskScript; from: string }>,
  where: string,
): CustomScript | undefined {
  if (row.sim !== undefined) {
    const r = RowScript.safeParse(row.sim);
    if (!r.success) {
      const i = r.error.issues[0]!;
      throw new RaasError('config_invalid', `sim datasets: ${where}: sim.${i.path.join('.')}: ${i.message}`, { retryable: false });
    }
    const fallback = [row.problem, row.problem_statement, row.question].find((t): t is string => typeof t === 'string' && t.length > 0);
    const match = r.data.match ?? fallback;
    if (match === undefined)
      throw new RaasError(
        'config_invalid',
        `sim datasets: ${where}: sim.match is required when the row has no problem, problem_statement or question: the text of the prompt that identifies the row`,
        { retryable: false },
      );
    return { match: asList(match), right: r.data.right, wrong: r.data.wrong ?? GIVE_UP };
  }
  const ds = row.data_source ?? row.task;
  const hit = scripts.find(({ script }) => typeof ds === 'string' && asList(script.data_source).includes(ds));
  if (!hit) return undefined;
  const call = <T>(what: string, f: () => T): T => {
    try {
      return f();
    } catch (err) {
      throw new RaasError('config_invalid', `sim policies: ${hit.from}: ${what}(row) failed on ${where}: ${(err as Error).message}`, {
        cause: err,
        retryable: false,
      });
    }
  };
  const match = asList(call('match', () => hit.script.match(row))).filter((t) => typeof t === 'string' && t.length > 0);
  if (match.length === 0)
    throw new RaasError('config_invalid', `sim policies: ${hit.from}: match(row) returned no text for ${where}`, { retryable: false });
  const right = call('right', () => hit.script.right(row));
  const wrong = hit.script.wrong ? call('wrong', () => hit.script.wrong!(row)) : GIVE_UP;
  for (const [what, steps] of [
    ['right', right],
    ['wrong', wrong],
  ] as const) {
    const r = z.array(Step).min(1).safeParse(steps);
    if (!r.success)
      throw new RaasError(
        'config_invalid',
        `sim policies: ${hit.from}: ${what}(row) for ${where}: ${r.error.issues[0]!.path.join('.')}: ${r.error.issues[0]!.message} (expected a list of {say?, name?, arguments?})`,
        { retryable: false },
      );
  }
  return { match, right, wrong };
}

/** True for a module's default export (or an element of it) that is a TaskScript. */
export function isTaskScript(v: unknown): v is TaskScript {
  const o = v as Partial<TaskScript> | null;
  return (
    !!o &&
    typeof o === 'object' &&
    typeof o.match === 'function' &&
    typeof o.right === 'function' &&
    (typeof o.data_source === 'string' || Array.isArray(o.data_source))
  );
}
