import { describe, expect, it } from 'vitest';
import { parseTrainConfig } from '../../src/dapo/config.js';
import { DapoCore } from '../../src/dapo/core.js';
import { PromptDataset, type Prompt } from '../../src/dapo/dataset.js';
import type { HistoryGroup, PromptRecord } from '../../src/dapo/history.js';
import { Selector, recency, streakOf } from '../../src/dapo/selection.js';
import type { SelectionConfig } from '../../src/protocol/config-train.js';
import { makeResult, runDes } from './des.js';

const cfgOf = (sel: Partial<SelectionConfig> = {}): SelectionConfig =>
  parseTrainConfig({ dataset: { path: 'x.jsonl' }, selection: { mode: 'history', ...sel } }).selection;
const grp = (verdict: HistoryGroup['verdict'], rewards: number[], version = 0): HistoryGroup => ({
  step: 0,
  version,
  rewards,
  errors: 0,
  verdict,
});
const rec = (groups: HistoryGroup[], skipStreak = 0): PromptRecord => ({
  data_source: 'chat',
  instance_id: 1,
  submitted: groups.length,
  skips: skipStreak,
  skip_streak: skipStreak,
  groups,
});

describe('streakOf: the run of latest uniform groups', () => {
  it('counts the latest uniform groups of one kind back to an informative one, passing over errors', () => {
    const r = rec([
      grp('filtered', [0, 0]),
      grp('accepted', [0, 1]),
      grp('filtered', [0, 0]),
      grp('dropped_error', [0]),
      grp('filtered', [0, 0]),
    ]);
    expect(streakOf(r, 0, null)).toEqual({ kind: 'hard', count: 2, weight: 2 });
  });
  it('a group uniform the other way ends the run (the prompt flipped from never to always solved)', () => {
    const r = rec([grp('filtered', [0, 0]), grp('filtered', [1, 1]), grp('filtered', [1, 1])]);
    expect(streakOf(r, 0, null)).toMatchObject({ kind: 'easy', count: 2 });
  });
  it('is undefined without history or when the latest group was informative', () => {
    expect(streakOf(undefined, 0, null)).toBeUndefined();
    expect(streakOf(rec([grp('filtered', [1, 1]), grp('accepted', [1, 0])]), 0, null)).toBeUndefined();
  });
  it('any reward scale: all equal and > 0 is easy, all equal and ≤ 0 hard', () => {
    expect(streakOf(rec([grp('filtered', [0.5, 0.5])]), 0, null)?.kind).toBe('easy');
    expect(streakOf(rec([grp('filtered', [-1, -1])]), 0, null)?.kind).toBe('hard');
  });
  it('weights each group by the recency of its policy: half per half-life', () => {
    expect(recency(20, 0, 10)).toBeCloseTo(0.25, 12);
    expect(recency(5, 5, 10)).toBe(1);
    expect(recency(5, 0, null)).toBe(1);
    const r = rec([grp('filtered', [0, 0], 0), grp('filtered', [0, 0], 10)]);
    expect(streakOf(r, 10, 10)!.weight).toBeCloseTo(1.5, 12);
  });
});

describe('Selector.decide', () => {
  const hard3 = rec([grp('filtered', [0, 0]), grp('filtered', [0, 0]), grp('filtered', [0, 0])]);
  it('mode none submits everything', () => {
    const s = new Selector(cfgOf({ mode: 'none' }), 4);
    expect(s.decide(hard3, 0, 0.999)).toEqual({ skip: false, keep: 1 });
  });
  it('submits prompts without a uniform streak whatever the draw', () => {
    const s = new Selector(cfgOf(), 4);
    expect(s.decide(undefined, 0, 0.9999).skip).toBe(false);
    expect(s.decide(rec([grp('accepted', [0, 1])]), 0, 0.9999).skip).toBe(false);
  });
  it('keeps a prompt with probability keep^weight: skip exactly when the draw is at or above it', () => {
    const s = new Selector(cfgOf({ initial_keep: 0.5, half_life_versions: null }), 4);
    const d = s.decide(hard3, 0, 0.1249);
    expect(d.keep).toBeCloseTo(0.125, 12);
    expect(d.skip).toBe(false);
    expect(s.decide(hard3, 0, 0.125).skip).toBe(true);
  });
  it('never keeps below the explore floor', () => {
    const long = rec(Array.from({ length: 50 }, () => grp('filtered', [1, 1])));
    const s = new Selector(cfgOf({ explore: 0.2, initial_keep: 0.5, half_life_versions: null }), 4);
    expect(s.decide(long, 0, 0).keep).toBe(0.2);
    expect(s.decide(long, 0, 0.1999).skip).toBe(false);
    expect(s.decide(long, 0, 0.2).skip).toBe(true);
  });
  it('submits a prompt skipped max_skips times in a row, whatever the draw', () => {
    const s = new Selector(cfgOf({ max_skips: 3 }), 4);
    expect(s.decide({ ...hard3, skip_streak: 2 }, 0, 0.999).skip).toBe(true);
    expect(s.decide({ ...hard3, skip_streak: 3 }, 0, 0.999)).toMatchObject({ skip: false, forced: true });
  });
  it('old evidence counts less: the same streak from 40 versions ago is kept more often', () => {
    const s = new Selector(cfgOf({ initial_keep: 0.5, half_life_versions: 20 }), 4);
    expect(s.decide(hard3, 40, 0).keep).toBeCloseTo(Math.pow(0.5, 3 / 4), 12);
  });
});

describe('Selector.observe: keep bases adapt toward target_informative', () => {
  it('too many uniform hard groups lower keep_hard by adapt_step per batch_size groups, and it stays within [0.05, 0.95]', () => {
    const s = new Selector(cfgOf({ target_informative: 0.75, adapt_step: 0.4, initial_keep: 0.5 }), 4);
    for (let i = 0; i < 3; i++) s.observe(grp('filtered', [0, 0]));
    expect(s.state().keep_hard).toBeCloseTo(0.2, 12);
    for (let i = 0; i < 20; i++) s.observe(grp('filtered', [0, 0]));
    expect(s.state().keep_hard).toBe(0.05);
    // no easy uniform group among them: easy prompts are skipped less
    expect(s.state().keep_easy).toBe(0.95);
  });
  it('informative groups raise both bases (the selector backs off), errors change nothing', () => {
    const s = new Selector(cfgOf({ adapt_step: 0.2, initial_keep: 0.5 }), 4);
    s.observe(grp('dropped_error', [1]));
    expect(s.state()).toMatchObject({ keep_easy: 0.5, keep_hard: 0.5, observed: 0 });
    s.observe(grp('accepted', [0, 1]));
    expect(s.state()).toMatchObject({ keep_easy: 0.55, keep_hard: 0.55, observed: 1 });
  });
  it('the moving shares average over max(8, 2 × batch_size) groups', () => {
    const s = new Selector(cfgOf(), 2);
    for (let i = 0; i < 8; i++) s.observe(grp('filtered', [1, 1]));
    expect(s.state().share_easy).toBeCloseTo(1, 12);
    s.observe(grp('accepted', [0, 1]));
    expect(s.state().share_easy).toBeCloseTo(7 / 8, 12);
  });
});

describe('DapoCore with selection: every skip is counted, the epoch logic holds', () => {
  // Prompts 0-9: half never solved, half always solved, so after one epoch every prompt has a
  // uniform streak; prompt 10 is mixed.
  const rows: Prompt[] = Array.from({ length: 11 }, (_, i) => ({ data_source: 'chat', instance_id: i }));
  const rewardOf = (i: number, k: number): number => (i === 10 ? k % 2 : i < 5 ? 0 : 1);
  function drive(selection: Partial<SelectionConfig>, epochs: number) {
    const cfg = parseTrainConfig({
      name: 't',
      dataset: { path: 'x.jsonl', epochs, shuffle: false },
      n: 2,
      batch_size: 1,
      max_staleness: 0,
      mode: 'sync',
      selection: { mode: 'history', ...selection },
    });
    let now = 0;
    const core = new DapoCore(
      cfg,
      new PromptDataset(rows, cfg.dataset, 0),
      { now: () => now, setTimeout: () => 0, clearTimeout: () => {} },
      100,
    );
    const batches = [];
    for (let guard = 0; guard < 100 && !core.exhausted(); guard++) {
      core.demand = true;
      for (const g of core.admit())
        g.requests.forEach((r, k) => core.onResult(r.job_id!, makeResult(r.job_id!, rewardOf(Number(g.prompt.instance_id), k), 3)));
      now += 10;
      if (core.ready()) batches.push(core.handover().batch);
      else if (core.runningGroups === 0 && core.dataset.exhausted) break;
    }
    return { core, batches };
  }

  it("counts skips per step and per prompt, and a skip takes the prompt's turn in the epoch", () => {
    const { core, batches } = drive({ explore: 0.05, initial_keep: 0.05, max_skips: 100 }, 4);
    const perPrompt = core.history.all();
    const turns = perPrompt.map((r) => r.submitted + r.skips);
    expect(turns).toEqual(rows.map(() => 4)); // 4 epochs: each prompt had 4 turns, run or skipped
    const skips = perPrompt.reduce((a, r) => a + r.skips, 0);
    expect(skips).toBeGreaterThan(10); // the uniform prompts were mostly skipped after epoch 0
    expect(core.totals.skipped).toBe(skips);
    expect(batches.reduce((a, b) => a + Number(b.stats.skipped), 0) + core.window.skipped).toBe(skips);
    expect(perPrompt.find((r) => r.instance_id === 10)!.skips).toBe(0); // the mixed prompt is never skipped
    const last = batches.at(-1)!.stats as Record<string, number>;
    expect(last).toMatchObject({ dataset_size: 11, prompts_mixed: 1 });
    expect(last.prompts_none_solved + last.prompts_all_solved).toBe(10);
  });

  it('mode none skips nothing and keeps the same counts', () => {
    const { core } = drive({ mode: 'none' }, 2);
    expect(core.totals.skipped).toBe(0);
    expect(core.history.all().map((r) => r.submitted)).toEqual(rows.map(() => 2));
  });

  it('one admission call skips at most one pass over the dataset, then submits (it always ends)', () => {
    const few: Prompt[] = rows.slice(0, 3);
    const cfg = parseTrainConfig({
      name: 't',
      dataset: { path: 'x.jsonl', shuffle: false },
      n: 2,
      batch_size: 1,
      max_staleness: 0,
      selection: { mode: 'history', max_skips: 1000, explore: 0.01, initial_keep: 0.05 },
    });
    const core = new DapoCore(
      cfg,
      new PromptDataset(few, cfg.dataset, 0),
      { now: () => 0, setTimeout: () => 0, clearTimeout: () => {} },
      100,
    );
    const finish = (gs: ReturnType<DapoCore['admit']>) =>
      gs.forEach((g) => g.requests.forEach((r) => core.onResult(r.job_id!, makeResult(r.job_id!, 0, 3))));
    // Ten groups of all-0 rewards per prompt: keep = max(0.01, 0.05^10).
    for (let i = 0; i < 10; i++)
      for (const p of few) core.history.recordGroup(p, { step: 0, version: 0, rewards: [0, 0], errors: 0, verdict: 'filtered' });
    for (let call = 0; call < 20; call++) {
      const before = core.totals.skipped;
      const gs = core.admit();
      expect(gs).toHaveLength(1);
      expect(core.totals.skipped - before).toBeLessThanOrEqual(few.length);
      finish(gs);
    }
  });

  it('with max_skips 0 nothing is ever skipped', () => {
    const { core } = drive({ max_skips: 0, initial_keep: 0.05 }, 3);
    expect(core.totals.skipped).toBe(0);
  });
});

describe('selection on the discrete-event fleet (real DapoCore, virtual time)', () => {
  // 200 prompts whose pass rate is 0, 1 or 0.5: after the first epoch the uniform ones are skipped.
  const rate = (i: number): number => [0, 0, 1, 0.5, 0][i % 5]!;
  const run = (mode: 'none' | 'history') =>
    runDes({ seed: 3, capacity: 32, steps: 40, prompts: 200, passRate: rate, config: { n: 8, batch_size: 8, selection: { mode } } });
  it('spends fewer rollouts per accepted group than without selection, and keeps the bound', () => {
    const none = run('none');
    const hist = run('history');
    for (const r of [none, hist]) {
      expect(r.batches).toHaveLength(40);
      expect(r.violations).toEqual([]);
    }
    const perAccepted = (r: ReturnType<typeof run>) => r.core.totals.jobs_submitted / r.core.totals.handed;
    expect(perAccepted(hist)).toBeLessThan(perAccepted(none) / 1.5);
    expect(hist.core.totals.skipped).toBeGreaterThan(0);
    expect(hist.core.history.all().every((r) => r.submitted > 0)).toBe(true); // every prompt still visited
    // each batch says with which probability each of its groups' prompts was submitted
    for (const b of hist.batches) {
      const keep = b.stats.group_keep as number[];
      expect(keep).toHaveLength(b.groups.length);
      for (const k of keep) expect(k >= 0.05 && k <= 1).toBe(true);
    }
    expect(none.batches.every((b) => (b.stats.group_keep as number[]).every((k) => k === 1))).toBe(true);
  });
});
