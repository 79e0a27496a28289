import { describe, expect, it } from 'vitest';
import { makeResult } from './des.js';
import { DapoCore } from '../../src/dapo/core.js';
import { PromptDataset } from '../../src/dapo/dataset.js';
import { parseTrainConfig } from '../../src/dapo/config.js';
import type { GroupRecord } from '../../src/dapo/group.js';
import type { Result } from '../../src/protocol/process.js';

// DapoCore's rules as docs/training.md states them, one by one, on a hand-driven core: admission,
// acceptance, handover, the staleness bound, cancels, and the totals every figure is built from.

type Cfg = Parameters<typeof parseTrainConfig>[0];

function setup(over: Record<string, unknown> = {}, opts: { capacity?: number; rows?: number; epochs?: number } = {}) {
  const cfg = parseTrainConfig({ name: 'm', n: 2, batch_size: 2, max_staleness: 1, dataset: { path: 'x' }, ...over } as Cfg);
  const rows = Array.from({ length: opts.rows ?? 50 }, (_, i) => ({ data_source: 'chat', instance_id: i }));
  let now = 0;
  const clock = { now: () => now, setTimeout: () => 0, clearTimeout: () => {} };
  const core = new DapoCore(cfg, new PromptDataset(rows, { shuffle: false, epochs: opts.epochs }, 0), clock, opts.capacity ?? 100);
  return { core, cfg, advance: (ms: number) => (now += ms) };
}

/** Ends every job of `g` with rewards `rs` (tokens `t` each); `err` marks rollouts as failed. */
function finish(core: DapoCore, g: GroupRecord, rs: number[], t = 3, err: Array<Result['critical_error']> = []): void {
  g.requests.forEach((r, k) => core.onResult(r.job_id!, makeResult(r.job_id!, rs[k], t, err[k] ?? null)));
}

describe('admission', () => {
  it('async: fills (max_staleness + 1) × batch_size groups, numbered from 0, under the current version and step', () => {
    const { core, cfg } = setup({ max_staleness: 2, batch_size: 2 });
    core.version = 4;
    const gs = core.admit();
    expect(gs.map((g) => g.index)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(gs.map((g) => g.id)).toEqual(['m-g0', 'm-g1', 'm-g2', 'm-g3', 'm-g4', 'm-g5']);
    expect(
      gs.every((g) => g.state === 'running' && g.submittedVersion === 4 && g.submittedStep === 0 && g.ended === 0 && g.tokens === 0),
    ).toBe(true);
    expect(gs[0].results).toEqual([undefined, undefined]);
    expect(gs[0].requests.map((r) => r.policy_version)).toEqual([4, 4]);
    expect(core.runningGroups).toBe(6);
    expect(core.runningJobs).toBe(6 * cfg.n);
    expect(core.totals).toMatchObject({ groups_submitted: 6, jobs_submitted: 12 });
    expect(core.admit()).toEqual([]); // full
    expect(core.groupOfJob('m-g3-r1')).toBe(gs[3]);
    expect(core.groupOfJob('m-g9-r0')).toBeUndefined();
  });

  it('async: buffered groups count against the bound; a handed group frees its place', () => {
    const { core } = setup({ max_staleness: 0, batch_size: 2 });
    const gs = core.admit();
    expect(gs).toHaveLength(2);
    finish(core, gs[0], [1, 0]);
    expect(core.admit()).toEqual([]); // one buffered + one running = 2 = (0 + 1) × 2
    finish(core, gs[1], [0, 1]);
    expect(core.admit()).toEqual([]);
    core.handover();
    expect(core.admit().map((g) => g.index)).toEqual([2, 3]);
  });

  it('async: stops when the next group would pass the capacity in jobs, but always admits one group when nothing runs', () => {
    const a = setup({ n: 4, max_staleness: 3, batch_size: 4 }, { capacity: 9 }).core;
    expect(a.admit()).toHaveLength(2); // 8 jobs; a third group would make 12 > 9
    const b = setup({ n: 4, max_staleness: 3, batch_size: 4 }, { capacity: 8 }).core;
    expect(b.admit()).toHaveLength(2); // exactly at the cap is allowed
    const c = setup({ n: 4 }, { capacity: 3 }).core;
    expect(c.admit()).toHaveLength(1); // n > capacity: one group at a time, never a stall
    expect(c.admit()).toHaveLength(0);
  });

  it('admits nothing while paused, and stops at the end of the dataset', () => {
    const { core } = setup({ max_staleness: 3 }, { rows: 3, epochs: 1 });
    core.paused = true;
    expect(core.admit()).toEqual([]);
    core.paused = false;
    expect(core.admit()).toHaveLength(3);
    expect(core.admit()).toEqual([]);
  });

  it('sync: admits batch_size groups only on demand, and only when nothing runs or is being cancelled', () => {
    const { core } = setup({ mode: 'sync', batch_size: 3 });
    expect(core.admit()).toEqual([]); // no demand
    core.demand = true;
    const gs = core.admit();
    expect(gs).toHaveLength(3);
    expect(core.admit()).toEqual([]); // running
    finish(core, gs[0], [1, 0]);
    finish(core, gs[1], [1, 1]); // filtered
    expect(core.ready()).toBe(false);
    expect(core.admit()).toEqual([]); // gs[2] still running
    finish(core, gs[2], [0, 1]);
    // two buffered of three: only the missing one is admitted
    expect(core.admit().map((g) => g.index)).toEqual([3]);
  });

  it('sync: a cancelling group blocks admission until its cancels are confirmed', () => {
    const { core } = setup({ mode: 'sync', batch_size: 1 });
    core.demand = true;
    const [g] = core.admit();
    expect(core.cancelAll()).toEqual(['m-g0-r0', 'm-g0-r1']);
    expect(core.cancellingGroups).toBe(1);
    expect(core.admit()).toEqual([]);
    finish(core, g, [0, 0]);
    expect(core.cancellingGroups).toBe(0);
    expect(core.admit()).toHaveLength(1);
  });
});

describe('results and verdicts', () => {
  it('accepts an informative group into the buffer and counts its tokens and rewards', () => {
    const { core } = setup();
    const [g] = core.admit();
    const before = core.runningJobs;
    core.onResult(g.requests[0].job_id!, makeResult('a', 1, 5));
    expect(g.state).toBe('running');
    expect(core.runningJobs).toBe(before - 1);
    core.onResult(g.requests[0].job_id!, makeResult('a', 0, 50)); // a duplicate is ignored
    core.onResult('m-g99-r0', makeResult('x', 1, 50)); // so is an unknown id
    expect(g.tokens).toBe(5);
    core.onResult(g.requests[1].job_id!, makeResult('b', 0, 7));
    expect(g.state).toBe('buffered');
    expect(g.ended).toBe(2);
    expect(core.totals).toMatchObject({ accepted: 1, tokens_generated: 12, filtered: 0, dropped_error: 0, tokens_wasted: 0 });
    expect(core.runningJobs).toBe(before - 2);
    expect(core.bufferedGroups).toEqual([g]);
  });

  it('filters a zero-variance group (its tokens are filtered, not wasted) and forgets it', () => {
    const { core } = setup();
    const [g] = core.admit();
    finish(core, g, [1, 1], 4);
    expect(g.state).toBe('filtered');
    expect(core.totals).toMatchObject({ filtered: 1, tokens_filtered: 8, tokens_wasted: 0, accepted: 0 });
    expect(core.groups.has(g.index)).toBe(false);
    expect(core.groupOfJob(g.requests[0].job_id!)).toBeUndefined();
  });

  it('drops a group with a failed rollout: its tokens are waste, the error counted in the window', () => {
    const { core, advance } = setup();
    const [g, h] = core.admit();
    finish(core, g, [1, 0], 4, [null, 'run']);
    expect(g.state).toBe('dropped');
    expect(core.totals).toMatchObject({ dropped_error: 1, tokens_wasted: 8, accepted: 0, filtered: 0 });
    expect(core.groups.has(g.index)).toBe(false);
    finish(core, h, [1, 0], 1);
    const gs2 = core.admit();
    finish(core, gs2[0], [0, 1], 1);
    advance(10);
    const { batch } = core.handover();
    expect(batch.stats.errors).toBe(1);
    expect(batch.stats.dropped_error).toBe(1);
    expect(batch.stats.tokens_wasted).toBe(8);
    // mean reward over the rollouts that ended cleanly: (1) + (1 + 0) + (0 + 1)
    expect(batch.stats.mean_reward).toBeCloseTo(3 / 5);
    expect(batch.stats.completed).toBe(3);
  });
});

describe('handover', () => {
  it('hands over batch_size groups, earliest first, with the step, the version and the batch stats', () => {
    const { core, advance } = setup({ batch_size: 2, max_staleness: 1 });
    const gs = core.admit();
    expect(core.ready()).toBe(false);
    finish(core, gs[2], [1, 0], 2);
    finish(core, gs[1], [0, 1], 3);
    expect(core.ready()).toBe(true);
    finish(core, gs[0], [1, 0], 4);
    advance(1000);
    const { batch, cancels } = core.handover();
    expect(cancels).toEqual([]);
    expect(batch.step).toBe(0);
    expect(batch.policy_version).toBe(0);
    expect(batch.groups.map((g) => g.group_id)).toEqual(['m-g0', 'm-g1']);
    expect(batch.stats).toMatchObject({
      submitted: 4,
      accepted: 3,
      carried_over: 0,
      tokens_used: 8 + 6,
      tokens_generated: 18,
      running_at_handover: 1,
      buffered_after_handover: 1,
      max_inflight_jobs: 100,
    });
    expect(batch.stats.staleness_histogram).toEqual({ '0': 4 });
    expect(core.step).toBe(1);
    expect(core.totals).toMatchObject({ handed: 2, tokens_used: 14 });
    expect(gs[0].state).toBe('handed');
    expect(core.groups.has(0)).toBe(false);
    expect(core.bufferedGroups.map((g) => g.index)).toEqual([2]);
    // a group submitted in step 0 and handed in step 1 is carried over
    finish(core, gs[3], [0, 1], 1);
    const next = core.handover();
    expect(next.batch.step).toBe(1);
    expect(next.batch.stats.carried_over).toBe(2);
    expect(next.batch.stats.submitted).toBe(0); // the window restarted at the handover
  });

  it('sync mode is ready only when nothing runs', () => {
    const { core } = setup({ mode: 'sync', batch_size: 1 });
    core.demand = true;
    const [g] = core.admit();
    finish(core, g, [1, 0]);
    expect(core.ready()).toBe(true);
    const { cancels } = core.handover();
    expect(cancels).toEqual([]);
  });

  it('without carry-over cancels every running group at handover; those are cancels, not stale drops', () => {
    const { core } = setup({ carry_over: false, batch_size: 1, max_staleness: 2 });
    const gs = core.admit();
    expect(gs).toHaveLength(3);
    finish(core, gs[0], [1, 0]);
    core.onResult(gs[1].requests[0].job_id!, makeResult('x', 1, 6));
    const { batch, cancels } = core.handover();
    expect(cancels).toEqual(['m-g1-r1', 'm-g2-r0', 'm-g2-r1']);
    expect(gs[1].state).toBe('cancelling');
    expect(core.totals).toMatchObject({ cancelled: 2, dropped_stale: 0, tokens_wasted: 6 });
    expect(batch.stats.running_at_handover).toBe(0);
    expect(core.cancellingGroups).toBe(2);
    // a late result of a cancelled job is waste, and the group ends once all its jobs did
    core.onResult('m-g1-r1', makeResult('y', 0, 5));
    expect(core.totals.tokens_wasted).toBe(11);
    expect(core.groups.has(1)).toBe(false);
    expect(core.cancellingGroups).toBe(1);
  });

  it('with carry-over cancels only running groups that would pass the bound at the next handover (stale)', () => {
    const { core } = setup({ batch_size: 1, max_staleness: 1 });
    const [g0, g1] = core.admit();
    expect(core.setVersion(1)).toEqual([]); // staleness 1 is within the bound
    finish(core, g0, [1, 0]);
    const { cancels, batch } = core.handover(); // v1: g1 would be at staleness 2 at v2
    expect(batch.groups[0].rollouts.map((r) => r.staleness)).toEqual([1, 1]);
    expect(batch.stats.staleness_histogram).toEqual({ '1': 2 });
    expect(cancels).toEqual(['m-g1-r0', 'm-g1-r1']);
    expect(g1.state).toBe('cancelling');
    expect(core.totals).toMatchObject({ cancelled: 1, dropped_stale: 1 });
  });

  it('a weight update drops buffered groups past the bound (stale, tokens wasted) and cancels running ones', () => {
    const { core } = setup({ batch_size: 2, max_staleness: 1 });
    const [g0, g1, g2] = core.admit();
    finish(core, g0, [1, 0], 5);
    core.onResult(g1.requests[0].job_id!, makeResult('x', 1, 2));
    expect(core.setVersion(1)).toEqual([]);
    expect(core.version).toBe(1);
    const cancels = core.setVersion(2);
    expect(cancels).toEqual(['m-g1-r1', 'm-g2-r0', 'm-g2-r1', 'm-g3-r0', 'm-g3-r1']);
    expect(g0.state).toBe('dropped');
    expect(core.groups.has(g0.index)).toBe(false);
    expect(core.bufferedGroups).toEqual([]);
    expect(g2.state).toBe('cancelling');
    expect(core.totals).toMatchObject({ dropped_stale: 4, cancelled: 3, tokens_wasted: 12 });
    expect(core.runningGroups).toBe(0);
  });

  it('a group cancelled after all its jobs ended leaves at once', () => {
    const { core } = setup({ batch_size: 1, max_staleness: 0 });
    const [g] = core.admit();
    finish(core, g, [1, 1]); // filtered, already gone
    const [h] = core.admit();
    core.onResult(h.requests[0].job_id!, makeResult('x', 1, 1));
    expect(core.cancelAll()).toEqual(['m-g1-r1']);
    expect(core.cancelAll()).toEqual([]); // cancelling groups are not cancelled twice
    expect(core.totals.cancelled).toBe(1);
  });
});

describe('end of a run', () => {
  it('is exhausted when the dataset is, nothing runs and too few groups are buffered', () => {
    const { core } = setup({ batch_size: 2, max_staleness: 1 }, { rows: 3, epochs: 1 });
    const gs = core.admit();
    expect(gs).toHaveLength(3);
    expect(core.exhausted()).toBe(false);
    finish(core, gs[0], [1, 0], 2);
    finish(core, gs[1], [1, 0], 2);
    expect(core.exhausted()).toBe(false); // g2 runs, two buffered make a batch
    core.onResult(gs[2].requests[0].job_id!, makeResult('x', 1, 3));
    expect(core.leftovers()).toEqual({
      running_groups: 1,
      running_jobs: 1,
      buffered_groups: 2,
      tokens_in_running: 3,
      tokens_in_buffered: 8,
    });
    core.handover();
    expect(core.exhausted()).toBe(false);
    finish(core, { ...gs[2], requests: gs[2].requests.slice(1) } as GroupRecord, [0]);
    expect(core.exhausted()).toBe(true); // one buffered < batch_size
  });

  it('worker utilization is busy job-time over capacity × time', () => {
    const { core, advance } = setup({ batch_size: 1, max_staleness: 0 }, { capacity: 4 });
    const [g] = core.admit(); // 2 jobs of capacity 4
    advance(100);
    finish(core, g, [1, 0]);
    const { batch } = core.handover();
    expect(batch.stats.worker_utilization).toBeCloseTo(0.5);
    expect(batch.stats.wall_s).toBeCloseTo(0.1);
  });
});

describe('restore from a checkpoint', () => {
  function saved(core: DapoCore, state: GroupRecord['state'], results: Array<Result | undefined>): GroupRecord {
    const g = core.admit()[0];
    core.groups.delete(g.index);
    return { ...g, state, results, ended: results.filter(Boolean).length, tokens: 0 };
  }

  it('re-tracks a running group with its unfinished jobs counted as running, and its tokens', () => {
    const a = setup({ batch_size: 1, max_staleness: 0 });
    const g = saved(a.core, 'running', [makeResult('x', 1, 4), undefined]);
    const { core } = setup({ batch_size: 1, max_staleness: 0 });
    core.restoreGroup(g);
    expect(core.runningJobs).toBe(1);
    expect(g.tokens).toBe(4);
    expect(core.groupOfJob('m-g0-r1')).toBe(g);
    core.onResult('m-g0-r1', makeResult('y', 0, 1));
    expect(g.state).toBe('buffered');
  });

  it('judges a buffered group again: kept when informative, dropped when not', () => {
    const a = setup({ batch_size: 1, max_staleness: 0 });
    const good = saved(a.core, 'buffered', [makeResult('x', 1, 1), makeResult('y', 0, 1)]);
    const b = setup({ batch_size: 1, max_staleness: 0 });
    const flat = saved(b.core, 'buffered', [makeResult('x', 1, 1), makeResult('y', 1, 1)]);
    const { core } = setup({ batch_size: 1, max_staleness: 0 });
    core.restoreGroup(good);
    expect(core.bufferedGroups).toEqual([good]);
    expect(good.advantages).toHaveLength(2);
    expect(core.runningJobs).toBe(0);
    const other = setup({ batch_size: 1, max_staleness: 0 }).core;
    other.restoreGroup(flat);
    expect(flat.state).toBe('dropped');
    expect(other.groups.size).toBe(0);
    expect(other.groupOfJob('m-g0-r0')).toBeUndefined();
  });
});

describe('window stats and edge rules', () => {
  it('counts the step window: submitted jobs, filtered groups and tokens, cancels, stale drops, cancelled jobs', () => {
    const { core, advance } = setup({ batch_size: 1, max_staleness: 1, n: 2 });
    const gs = core.admit(); // 2 groups, 4 jobs
    finish(core, gs[0], [1, 1], 3); // filtered: 6 tokens
    const [g2] = core.admit();
    core.onResult(gs[1].requests[0].job_id!, makeResult('x', 1, 2));
    core.setVersion(1);
    const cancels = core.setVersion(3); // gs[1] and g2 past the bound: 3 jobs cancelled
    expect(cancels).toEqual(['m-g1-r1', 'm-g2-r0', 'm-g2-r1']);
    expect(g2.state).toBe('cancelling');
    for (const id of cancels) core.onResult(id, makeResult(id, 0, 0, 'cancelled'));
    const [g3] = core.admit();
    finish(core, g3, [1, 0], 1);
    advance(10);
    const { batch } = core.handover();
    expect(batch.stats).toMatchObject({
      submitted: 5,
      jobs_submitted: 10,
      filtered: 1,
      tokens_filtered: 6,
      cancelled: 2,
      dropped_stale: 2,
      jobs_cancelled: 3,
      accepted: 1,
    });
    expect(batch.stats.batch_mean_reward).toBeCloseTo(0.5);
  });

  it('an errored result of a group being cancelled is waste, not an error of the window; every late result is waste', () => {
    const { core } = setup({ batch_size: 1, max_staleness: 0, n: 3 });
    const [g] = core.admit();
    core.cancelAll();
    core.onResult('m-g0-r0', makeResult('a', 0, 2, 'cancelled'));
    expect(core.groups.has(0)).toBe(true); // two cancels not confirmed yet
    core.onResult('m-g0-r1', makeResult('b', 0, 3, 'run'));
    core.onResult('m-g0-r2', makeResult('c', 0, 4, 'cancelled'));
    expect(core.totals.tokens_wasted).toBe(9);
    expect(g.state).toBe('cancelled');
    expect(core.groups.has(0)).toBe(false);
    const [h] = core.admit();
    finish(core, h, [1, 0]);
    expect(core.handover().batch.stats.errors).toBe(0);
  });

  it('the bound counts staleness from the version each group was submitted under', () => {
    const { core } = setup({ batch_size: 1, max_staleness: 1 });
    core.setVersion(2);
    const [g] = core.admit();
    expect(g.submittedVersion).toBe(2);
    expect(core.setVersion(3)).toEqual([]);
    expect(g.state).toBe('running');
    expect(core.setVersion(4)).toEqual(['m-g0-r0', 'm-g0-r1', 'm-g1-r0', 'm-g1-r1']);
  });

  it('a group already being cancelled is not cancelled again by a later update', () => {
    const { core } = setup({ batch_size: 1, max_staleness: 0 });
    core.admit();
    expect(core.setVersion(1)).toEqual(['m-g0-r0', 'm-g0-r1']);
    expect(core.setVersion(2)).toEqual([]);
    expect(core.totals.cancelled).toBe(1);
  });

  it('without carry-over a handover cancels running groups only: buffered ones stay for the next batch', () => {
    const { core } = setup({ carry_over: false, batch_size: 1, max_staleness: 2 });
    const gs = core.admit();
    finish(core, gs[0], [1, 0]);
    finish(core, gs[1], [0, 1]);
    const { cancels } = core.handover();
    expect(cancels).toEqual(['m-g2-r0', 'm-g2-r1']);
    expect(core.bufferedGroups.map((g) => g.index)).toEqual([1]);
  });

  it('hands over the messages when return_messages is set (in the config or in sampling_params)', () => {
    for (const over of [{ return_messages: true }, { sampling_params: { return_messages: true } }, {}]) {
      const { core } = setup({ batch_size: 1, ...over });
      const [g] = core.admit();
      finish(core, g, [1, 0]);
      const { batch } = core.handover();
      expect('messages' in batch.groups[0].rollouts[0]).toBe(Object.keys(over).length > 0);
    }
  });

  it('sync mode: never ready while a group runs; admits nothing past the end of the dataset', () => {
    const { core } = setup({ mode: 'sync', batch_size: 1 }, { rows: 2, epochs: 1 });
    core.demand = true;
    const [g] = core.admit();
    finish(core, g, [1, 0]);
    const other = setup({ mode: 'sync', batch_size: 1 }).core;
    other.demand = true;
    const running = { ...other.admit()[0], index: 5 };
    core.restoreGroup({ ...running, requests: running.requests.map((r, k) => ({ ...r, job_id: `m-g5-r${k}` })) });
    expect(core.runningGroups).toBe(1);
    expect(core.ready()).toBe(false);
    const s = setup({ mode: 'sync', batch_size: 3 }, { rows: 2, epochs: 1 }).core;
    s.demand = true;
    expect(s.admit()).toHaveLength(2);
  });

  it('is not exhausted while exactly batch_size groups are buffered', () => {
    const { core } = setup({ batch_size: 2, max_staleness: 0 }, { rows: 2, epochs: 1 });
    const gs = core.admit();
    finish(core, gs[0], [1, 0]);
    finish(core, gs[1], [1, 0]);
    expect(core.exhausted()).toBe(false);
    core.handover();
    expect(core.exhausted()).toBe(true);
  });

  it('restored buffered groups are handed over in index order', () => {
    const { core } = setup({ batch_size: 2, max_staleness: 0 });
    const src = setup({ batch_size: 4, max_staleness: 0 }).core.admit();
    for (const g of [src[3], src[1], src[2]]) {
      g.results = [makeResult('a', 1, 1), makeResult('b', 0, 1)];
      g.ended = 2;
      g.state = 'buffered';
      core.restoreGroup(g);
    }
    expect(core.bufferedGroups.map((g) => g.index)).toEqual([1, 2, 3]);
    expect(core.handover().batch.groups.map((g) => g.group_id)).toEqual(['m-g1', 'm-g2']);
  });
});
