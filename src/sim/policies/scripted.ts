import type { PolicyContext, PolicyTurn, SimPolicy } from '../policy.js';
import type { TaskRow } from './rows.js';
import { parseTranscript, renderCall, type PolicyCall, type Transcript } from './transcript.js';

/** One scripted turn: some prose, then one tool call (or none). Dynamic parts read the latest tool responses. */
export interface Step {
  /** A fixed call (later turns recognise it in the transcript), one built from the tool responses, or none (a final text answer). */
  call?: PolicyCall | ((responses: string[]) => PolicyCall);
  /** Prose before the call; one of the variants is picked with the request's rng. */
  say: string[] | ((responses: string[]) => string);
  /** Reasoning shown inside `<think>` when thinking is on. */
  think: string;
}

/** Builds the plan for one row: `right` decides the answer, `variant` the route to it. */
export type PlanBuilder<R extends TaskRow> = (row: R, right: boolean, variant: number) => Step[];

/** Which rows a policy scripts, and how. */
export interface ScriptSpec<R extends TaskRow> {
  name: string;
  rows: R[];
  variants: number;
  plan: PlanBuilder<R>;
}

/**
 * A policy that follows a scripted plan. The state of a rollout lives only in its transcript: each
 * turn, the plans still consistent with the earlier tool calls are kept, and a choice that is still
 * open (right or wrong, which variant) is drawn with the request's rng where it first matters. So a
 * group's rollouts differ, a rerun of one request is identical, and P(right) is the row's
 * probability (raised by boostPerUpdate per weight update).
 */
export class ScriptedPolicy<R extends TaskRow> implements SimPolicy {
  readonly name: string;
  private readonly match: Matcher<R>;
  private readonly plans = new Map<string, Step[]>();

  constructor(private readonly spec: ScriptSpec<R>) {
    this.name = spec.name;
    this.match = new Matcher(spec.rows);
  }

  respond(ctx: PolicyContext): PolicyTurn | undefined {
    const t = parseTranscript(ctx.promptText);
    if (t.firstUser === undefined) return undefined;
    const row = this.match.find(t.firstUser);
    if (!row) return undefined;
    const k = t.assistant.length;
    const candidates: Array<{ right: boolean; variant: number; steps: Step[] }> = [];
    for (const right of [true, false]) {
      for (let v = 0; v < this.spec.variants; v++) {
        const steps = this.planFor(row, right, v);
        if (consistent(steps, t)) candidates.push({ right, variant: v, steps });
      }
    }
    const pRight = ctx.passRate
      ? ctx.passRate(`${row.task}:${row.key}`, row.p)
      : row.p === 0
        ? 0
        : Math.min(1, row.p + ctx.boostPerUpdate * ctx.updates);
    const wantRight = ctx.rng() < pRight;
    const pool =
      candidates.length === 0
        ? []
        : candidates.filter((c) => c.right === wantRight).length > 0
          ? candidates.filter((c) => c.right === wantRight)
          : candidates;
    let steps: Step[];
    let at: number;
    if (pool.length === 0) {
      // The transcript left every plan (a truncated turn, an edited prompt): wrap up.
      steps = this.planFor(row, wantRight, 0);
      at = steps.length - 1;
    } else {
      steps = pool[Math.floor(ctx.rng() * pool.length)]!.steps;
      at = Math.min(k, steps.length - 1);
    }
    return { text: render(steps[at]!, t, ctx.rng) };
  }

  private planFor(row: R, right: boolean, variant: number): Step[] {
    const key = `${row.key}\u0000${right}\u0000${variant}`;
    let steps = this.plans.get(key);
    if (!steps) {
      steps = this.spec.plan(row, right, variant);
      if (this.plans.size > 50_000) this.plans.clear();
      this.plans.set(key, steps);
    }
    return steps;
  }
}

function consistent(steps: Step[], t: Transcript): boolean {
  if (t.assistant.length >= steps.length) return false;
  for (let i = 0; i < t.assistant.length; i++) {
    const seen = t.assistant[i]!.calls[0];
    const step = steps[i]!.call;
    if (step === undefined) {
      if (seen) return false;
      continue;
    }
    if (!seen) return false;
    if (typeof step === 'function') {
      if (step([]).name !== seen.name) return false;
    } else if (step.name !== seen.name || JSON.stringify(step.arguments) !== JSON.stringify(seen.arguments)) return false;
  }
  return true;
}

function render(step: Step, t: Transcript, r: () => number): string {
  const call = typeof step.call === 'function' ? step.call(t.toolResponses) : step.call;
  const say = typeof step.say === 'function' ? step.say(t.toolResponses) : step.say[Math.floor(r() * step.say.length)]!;
  const think = t.thinking ? `<think>\n${step.think}\n</think>\n\n` : '';
  return call ? `${think}${say}\n${renderCall(call)}` : `${think}${say}`;
}

/**
 * Finds the row whose texts (its problem, or a custom row's match texts) all appear in a first user
 * message. Results are cached per message (a group's rollouts and every later turn share it), so
 * the linear scan runs once per prompt.
 */
class Matcher<R extends TaskRow> {
  private readonly cache = new Map<string, R | null>();
  private readonly rows: Array<{ texts: string[]; length: number; rich: number; row: R }>;

  constructor(rows: R[]) {
    // Longest first: a problem that contains another's text wins. Of rows with the same texts (a
    // plain row and its veRL copy), the one with reference fields to play from comes first.
    this.rows = rows
      .map((row) => {
        const texts = textsOf(row)
          .map((t) => t.trim())
          .filter((t) => t.length > 0);
        return { texts, length: texts.reduce((a, t) => a + t.length, 0), rich: richness(row), row };
      })
      .filter((r) => r.texts.length > 0)
      .sort((a, b) => b.length - a.length || b.rich - a.rich);
  }

  find(user: string): R | undefined {
    let hit = this.cache.get(user);
    if (hit === undefined) {
      hit = this.rows.find((r) => r.texts.every((t) => user.includes(t)))?.row ?? null;
      if (this.cache.size > 20_000) this.cache.clear();
      this.cache.set(user, hit);
    }
    return hit ?? undefined;
  }
}

function textsOf(row: TaskRow): string[] {
  if (row.task === 'custom') return row.script.match;
  return [row.task === 'swe' ? row.instance.problem_statement : row.instance.problem];
}

/** How much a row gives a plan to play from: a reference solution or fix beats none. */
function richness(row: TaskRow): number {
  if (row.task === 'code') return row.instance.reference_solution ? 1 : 0;
  if (row.task === 'swe') return row.instance.gold_patch || (row.instance as { patch?: unknown }).patch ? 1 : 0;
  return 0;
}

/** The last non-empty line of a text (a printed value, a test summary). */
export function lastLine(text: string | undefined): string | undefined {
  const lines = (text ?? '')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.length > 0);
  return lines[lines.length - 1];
}
