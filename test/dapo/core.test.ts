import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { runDes, makeResult } from './des.js';
import { DapoCore } from '../../src/dapo/core.js';
import { PromptDataset } from '../../src/dapo/dataset.js';
import { parseTrainConfig } from '../../src/dapo/config.js';

describe('DapoCore (discrete-event fleet, no HTTP)', () => {
  it('never exceeds the staleness bound, over many seeds, bounds and update patterns', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 1_000_000 }),
        fc.integer({ min: 0, max: 3 }),
        fc.boolean(),
        fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 6, maxLength: 6 }),
        fc.integer({ min: 2, max: 6 }),
        (seed, eta, carry, updates, B) => {
          const n = 4;
          const run = runDes({
            seed,
            steps: 6,
            capacity: 24,
            config: { n, batch_size: B, max_staleness: eta, carry_over: carry },
            updatesPerStep: (s) => updates[s % updates.length],
          });
          const seen = new Set<string>();
          for (const b of run.batches) {
            expect(b.groups.length).toBe(B);
            for (const g of b.groups) {
              const rewards = g.rollouts.map((r) => r.reward);
              expect(new Set(rewards).size).toBeGreaterThan(1); // accepted groups are informative
              for (const r of g.rollouts) {
                expect(r.staleness).toBeLessThanOrEqual(eta);
                expect(r.staleness).toBe(b.policy_version - r.policy_version);
                expect(seen.has(r.job_id)).toBe(false);
                expect(run.cancelledIds.has(r.job_id)).toBe(false);
                seen.add(r.job_id);
              }
            }
          }
          expect(run.maxAdmitted).toBeLessThanOrEqual((eta + 1) * B);
          expect(run.violations).toEqual([]);
        },
      ),
      { numRuns: 150 },
    );
  });

  it('hands over the groups submitted earliest and keeps the rest buffered', () => {
    const cfg = parseTrainConfig({ name: 'h', n: 2, batch_size: 2, dataset: { path: 'x' } });
    const rows = [0, 1, 2, 3].map((i) => ({ data_source: 'chat', instance_id: i }));
    const core = new DapoCore(
      cfg,
      new PromptDataset(rows, { shuffle: false }, 0),
      { now: () => 0, setTimeout: () => 0, clearTimeout: () => {} },
      8,
    );
    const gs = core.admit();
    expect(gs.map((g) => g.index)).toEqual([0, 1, 2, 3]);
    // groups 3, 2 and 0 are accepted in that order; 1 is still running
    for (const i of [3, 2, 0]) {
      core.onResult(gs[i].requests[0].job_id!, makeResult('x', 1, 3));
      core.onResult(gs[i].requests[1].job_id!, makeResult('y', 0, 3));
    }
    expect(core.ready()).toBe(true);
    const { batch, cancels } = core.handover();
    expect(batch.groups.map((g) => g.group_id)).toEqual(['h-g0', 'h-g2']);
    expect(core.bufferedGroups.map((g) => g.index)).toEqual([3]);
    expect(core.runningGroups).toBe(1); // carried over: submitted under the current version
    expect(cancels).toEqual([]);
    expect(batch.stats.buffered_after_handover).toBe(1);
    expect(batch.groups[0].rollouts.map((r) => r.advantage)).toEqual([expect.closeTo(0.7071, 3), expect.closeTo(-0.7071, 3)]);
  });

  it('carries running groups over and credits them to the next step (carry_over: true)', () => {
    const run = runDes({ seed: 3, steps: 5, capacity: 32, config: { n: 4, batch_size: 4, max_staleness: 1 } });
    const carried = run.batches.slice(1).reduce((a, b) => a + b.stats.carried_over, 0);
    expect(carried).toBeGreaterThan(0);
    expect(run.batches.slice(1).some((b) => (b.stats.staleness_histogram['1'] ?? 0) > 0)).toBe(true);
  });

  it('cancels every running group at handover without carry-over, and nothing in sync mode', () => {
    const noCarry = runDes({ seed: 5, steps: 4, capacity: 32, config: { n: 4, batch_size: 4, carry_over: false } });
    for (const b of noCarry.batches) {
      expect(b.stats.running_at_handover).toBe(0);
      expect(b.stats.carried_over).toBe(0);
    }
    expect(noCarry.cancelledIds.size).toBeGreaterThan(0);
    expect(noCarry.core.totals.tokens_wasted).toBeGreaterThan(0);

    const sync = runDes({ seed: 5, steps: 4, capacity: 32, config: { n: 4, batch_size: 4, mode: 'sync' } });
    expect(sync.cancelledIds.size).toBe(0);
    expect(sync.core.totals.tokens_wasted).toBe(0);
    for (const b of sync.batches) {
      expect(Object.keys(b.stats.staleness_histogram)).toEqual(['0']);
      expect(b.stats.jobs_cancelled).toBe(0);
    }
  });

  it('async keeps workers busier than sync on heavy-tailed lengths', () => {
    const o = { seed: 11, steps: 5, capacity: 32, trainMs: 200, sigma: 1 };
    const util = (r: ReturnType<typeof runDes>): number => r.batches.reduce((a, b) => a + b.stats.worker_utilization, 0) / r.batches.length;
    const a = runDes({ ...o, config: { n: 4, batch_size: 8 } });
    const s = runDes({ ...o, config: { n: 4, batch_size: 8, mode: 'sync' } });
    expect(util(a)).toBeGreaterThan(util(s));
    const time = (r: ReturnType<typeof runDes>): number => r.batches.reduce((x, b) => x + b.stats.wall_s, 0);
    expect(time(a)).toBeLessThan(time(s));
  });

  it('filters zero-variance groups at once and frees their place; counts tokens', () => {
    const cfg = parseTrainConfig({ name: 'f', n: 2, batch_size: 1, dataset: { path: 'x' } });
    let now = 0;
    const core = new DapoCore(
      cfg,
      new PromptDataset([{ data_source: 'chat', instance_id: 0 }], { shuffle: false }, 0),
      { now: () => now, setTimeout: () => 0, clearTimeout: () => {} },
      2,
    );
    const [g] = core.admit();
    expect(core.admit()).toEqual([]); // capacity 2 = one group of n = 2
    now = 1000;
    core.onResult(g.requests[0].job_id!, makeResult('a', 1, 10));
    core.onResult(g.requests[0].job_id!, makeResult('a', 0, 99)); // duplicate: ignored
    core.onResult(g.requests[1].job_id!, makeResult('b', 1, 20));
    expect(core.totals.filtered).toBe(1);
    expect(core.totals.tokens_filtered).toBe(30);
    expect(core.totals.tokens_generated).toBe(30);
    expect(core.runningJobs).toBe(0);
    expect(core.admit()).toHaveLength(1); // the filtered group freed its place
  });

  it('on_error: drop_group drops a group with a failed rollout; zero_reward scores it 0', () => {
    const mk = (on_error: 'drop_group' | 'zero_reward'): DapoCore => {
      const cfg = parseTrainConfig({ name: 'e', n: 2, batch_size: 1, on_error, dataset: { path: 'x' } });
      return new DapoCore(
        cfg,
        new PromptDataset([{ data_source: 'chat', instance_id: 0 }], { shuffle: false }, 0),
        { now: () => 0, setTimeout: () => 0, clearTimeout: () => {} },
        8,
      );
    };
    for (const mode of ['drop_group', 'zero_reward'] as const) {
      const core = mk(mode);
      const [g] = core.admit();
      core.onResult(g.requests[0].job_id!, makeResult('a', 1, 5));
      core.onResult(g.requests[1].job_id!, makeResult('b', 1, 5, 'run'));
      if (mode === 'drop_group') {
        expect(core.totals.dropped_error).toBe(1);
        expect(core.totals.tokens_wasted).toBe(10);
      } else {
        expect(core.ready()).toBe(true);
        const { batch } = core.handover();
        expect(batch.groups[0].rollouts.map((r) => r.reward)).toEqual([1, 0]);
        expect(batch.stats.errors).toBe(1);
      }
    }
  });
});
