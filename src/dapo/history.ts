import { z } from 'zod';
import type { Prompt } from './dataset.js';

/** One finished group of a prompt, as the history keeps it. */
export const HistoryGroup = z.object({
  /** Step window the group finished in. */
  step: z.number().int().nonnegative(),
  /** Policy version it was submitted under. */
  version: z.number().int().nonnegative(),
  /** Task rewards (before shaping) of the rollouts that ended cleanly, in rollout order. */
  rewards: z.array(z.number()),
  /** Rollouts that ended in an error (absent from `rewards`). */
  errors: z.number().int().nonnegative().default(0),
  verdict: z.enum(['accepted', 'filtered', 'dropped_error']),
});
export type HistoryGroup = z.infer<typeof HistoryGroup>;

/** What the coordinator knows of one prompt (one line of `prompts.jsonl`). */
export const PromptRecord = z.object({
  data_source: z.string(),
  instance_id: z.union([z.string(), z.number()]),
  /** Groups submitted (finished, running or cancelled). */
  submitted: z.number().int().nonnegative().default(0),
  /** Times selection skipped the prompt, and how many of those in a row since it last ran. */
  skips: z.number().int().nonnegative().default(0),
  skip_streak: z.number().int().nonnegative().default(0),
  /** Step of the last skip, if any. */
  last_skip_step: z.number().int().nonnegative().optional(),
  groups: z.array(HistoryGroup).default([]),
});
export type PromptRecord = z.infer<typeof PromptRecord>;

/** The history as a checkpoint keeps it. */
export const HistoryState = z.array(PromptRecord);

/** How a prompt's latest groups ended: the summary metrics.jsonl counts. */
type PromptStanding = 'unseen' | 'mixed' | 'none_solved' | 'all_solved' | 'errors';

/** The key a prompt is known by across epochs: data source and instance id. */
function promptKey(p: Pick<Prompt, 'data_source' | 'instance_id'>): string {
  return `${p.data_source}\u0000${typeof p.instance_id}\u0000${p.instance_id}`;
}

/** Counts over the history (metrics.jsonl, status). */
export interface HistorySummary {
  /** Prompts submitted at least once. */
  prompts_visited: number;
  /** Prompts with at least one finished group. */
  prompts_seen: number;
  /** By the prompt's latest finished group: informative, all rewards ≤ 0, all equal and > 0. */
  prompts_mixed: number;
  prompts_none_solved: number;
  prompts_all_solved: number;
  /** Prompts skipped at least once, and skips in total. */
  prompts_skipped: number;
  skips: number;
}

/**
 * Per prompt, the rewards of every group it had (with the step and policy version), how often it
 * was submitted and how often selection skipped it. Kept in the coordinator's checkpoint, written
 * as `prompts.jsonl`, and read by selection and adaptive n.
 */
export class PromptHistory {
  private readonly records = new Map<string, PromptRecord>();

  /** The record of a prompt (created empty on first use). */
  of(p: Pick<Prompt, 'data_source' | 'instance_id'>): PromptRecord {
    const key = promptKey(p);
    let r = this.records.get(key);
    if (!r) {
      r = { data_source: p.data_source, instance_id: p.instance_id, submitted: 0, skips: 0, skip_streak: 0, groups: [] };
      this.records.set(key, r);
    }
    return r;
  }

  /** The record of a prompt if it has one. */
  peek(p: Pick<Prompt, 'data_source' | 'instance_id'>): PromptRecord | undefined {
    return this.records.get(promptKey(p));
  }

  get size(): number {
    return this.records.size;
  }

  recordSubmit(p: Prompt): void {
    const r = this.of(p);
    r.submitted++;
    r.skip_streak = 0;
  }

  recordSkip(p: Prompt, step: number): void {
    const r = this.of(p);
    r.skips++;
    r.skip_streak++;
    r.last_skip_step = step;
  }

  recordGroup(p: Prompt, g: HistoryGroup): void {
    this.of(p).groups.push(g);
  }

  /** Every record, in first-seen order. */
  all(): PromptRecord[] {
    return [...this.records.values()];
  }

  /** Restores records from a checkpoint (replacing any of the same prompt). */
  load(records: readonly PromptRecord[]): void {
    for (const r of records) this.records.set(promptKey(r), { ...r, groups: [...r.groups] });
  }

  summary(): HistorySummary {
    const s: HistorySummary = {
      prompts_visited: 0,
      prompts_seen: 0,
      prompts_mixed: 0,
      prompts_none_solved: 0,
      prompts_all_solved: 0,
      prompts_skipped: 0,
      skips: 0,
    };
    for (const r of this.records.values()) {
      if (r.submitted > 0) s.prompts_visited++;
      if (r.skips > 0) s.prompts_skipped++;
      s.skips += r.skips;
      const st = standing(r);
      if (st === 'unseen') continue;
      s.prompts_seen++;
      if (st === 'mixed') s.prompts_mixed++;
      else if (st === 'none_solved') s.prompts_none_solved++;
      else if (st === 'all_solved') s.prompts_all_solved++;
    }
    return s;
  }
}

/** How the prompt's latest finished group ended. */
function standing(r: PromptRecord): PromptStanding {
  const g = r.groups.at(-1);
  if (!g) return 'unseen';
  if (g.verdict === 'accepted') return 'mixed';
  if (g.verdict === 'dropped_error') return 'errors';
  return (g.rewards[0] ?? 0) > 0 ? 'all_solved' : 'none_solved';
}
