import type { Tokenizer } from './tokenizer.js';

/** One model turn whose text round trip gives other ids. */
interface DriftExample {
  trajectory: string;
  turn: number;
  /** The ids that differ (the middle after the common prefix and suffix), as generated and re-encoded. */
  generated: number[];
  reencoded: number[];
  /** The decoded text of that middle. */
  text: string;
}

/** What `raas audit-drift` reports. */
export interface DriftReport {
  trajectories: number;
  trajectories_changed: number;
  model_turns: number;
  turns_changed: number;
  model_tokens: number;
  /** Generated ids inside the differing middles: what a text round trip would have replaced. */
  tokens_changed: number;
  /** Lines that held no token view (skipped). */
  skipped: number;
  examples: DriftExample[];
}

/** A trajectory's token view as results and batch rollouts carry it. */
export interface TokenView {
  id: string;
  response_ids: readonly number[];
  response_mask: readonly number[];
}

/** The model turns of a token view: maximal runs of mask 1. */
export function modelTurns(v: TokenView): number[][] {
  const turns: number[][] = [];
  let cur: number[] | undefined;
  v.response_ids.forEach((id, i) => {
    if (v.response_mask[i] === 1) (cur ??= []).push(id);
    else if (cur) {
      turns.push(cur);
      cur = undefined;
    }
  });
  if (cur) turns.push(cur);
  return turns;
}

/** Compares generated ids with their decode→encode round trip; the differing middle, or undefined when equal. */
function roundTripDiff(tok: Tokenizer, ids: readonly number[]): { generated: number[]; reencoded: number[] } | undefined {
  const again = tok.encode(tok.decode(ids));
  let p = 0;
  while (p < ids.length && p < again.length && ids[p] === again[p]) p++;
  if (p === ids.length && p === again.length) return undefined;
  let s = 0;
  while (s < ids.length - p && s < again.length - p && ids[ids.length - 1 - s] === again[again.length - 1 - s]) s++;
  return { generated: ids.slice(p, ids.length - s), reencoded: again.slice(p, again.length - s) };
}

/**
 * Audits re-tokenisation drift: for each trajectory, decodes and re-encodes every model turn and
 * counts the trajectories, turns and tokens a text round trip would have changed (what an agent
 * that re-tokenises its history would have trained on instead of what the model generated).
 */
export function auditDrift(tok: Tokenizer, views: Iterable<TokenView | undefined>, opts: { maxExamples?: number } = {}): DriftReport {
  const maxExamples = opts.maxExamples ?? 5;
  const r: DriftReport = {
    trajectories: 0,
    trajectories_changed: 0,
    model_turns: 0,
    turns_changed: 0,
    model_tokens: 0,
    tokens_changed: 0,
    skipped: 0,
    examples: [],
  };
  for (const v of views) {
    if (!v) {
      r.skipped++;
      continue;
    }
    r.trajectories++;
    let changed = false;
    modelTurns(v).forEach((ids, turn) => {
      r.model_turns++;
      r.model_tokens += ids.length;
      const d = roundTripDiff(tok, ids);
      if (!d) return;
      changed = true;
      r.turns_changed++;
      r.tokens_changed += d.generated.length;
      if (r.examples.length < maxExamples) r.examples.push({ trajectory: v.id, turn, ...d, text: tok.decode(d.generated) });
    });
    if (changed) r.trajectories_changed++;
  }
  return r;
}

/**
 * The token views in one JSONL line: a rollout result (`tokens`), a DAPO batch (`groups[].rollouts[]`),
 * or a bare rollout. Returns [] for a line with none.
 */
export function viewsOfLine(line: unknown, lineNo: number): TokenView[] {
  if (typeof line !== 'object' || line === null) return [];
  // biome-ignore lint/suspicious/noExplicitAny: a batch line of any shape, every field checked before use
  const o = line as Record<string, any>;
  if (Array.isArray(o.groups))
    return o.groups.flatMap((g: { rollouts?: unknown } | null, gi: number) =>
      Array.isArray(g?.rollouts)
        ? g.rollouts.flatMap((ro: unknown, ri: number) =>
            viewsOfLine(ro, lineNo).map((v) => ({ ...v, id: v.id === `line ${lineNo}` ? `line ${lineNo} g${gi} r${ri}` : v.id })),
          )
        : [],
    );
  const t = o.tokens;
  if (!t || !Array.isArray(t.response_ids) || !Array.isArray(t.response_mask)) return [];
  return [
    {
      id: String(o.job_id ?? o.trajectory_id ?? o.instance_id ?? `line ${lineNo}`),
      response_ids: t.response_ids,
      response_mask: t.response_mask,
    },
  ];
}
