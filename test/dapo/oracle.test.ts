// The bench:dapo oracle (bench/dapo-oracle.ts) on cases whose ideal schedule is worked out by hand.
import { describe, expect, it } from 'vitest';
import { oracleSchedule, type OracleGroup } from '../../bench/dapo-oracle.js';
import { replayCoordinator } from '../../bench/dapo-replay.js';
import { Recorder } from '../../bench/dapo-record.js';
import { makeResult } from './des.js';

const same = (count: number, n: number, d: number, informative = true): OracleGroup[] =>
  Array.from({ length: count }, () => ({ durations: new Array(n).fill(d), informative }));

describe('oracleSchedule', () => {
  it('sync (bound 0), one round fills the workers: each step takes d + T', () => {
    const d = 2,
      T = 0.5,
      S = 4,
      B = 3,
      n = 4;
    const r = oracleSchedule(same(20, n, d), { workers: n * B, batch_size: B, max_staleness: 0, train_s: T, steps: S });
    expect(r.wall_s).toBeCloseTo(S * (d + T), 9);
    expect(r.informative_groups_per_s).toBeCloseTo(B / (d + T), 9);
    expect(r.handover_s).toEqual([2, 4.5, 7, 9.5]);
    // Workers idle while the trainer trains.
    expect(r.utilization).toBeCloseTo(d / (d + T), 9);
    // Groups admitted as the round's workers free up are dropped at the handover, before any work.
    expect(r.waste_fraction).toBe(0);
  });

  it('async (bound 1), trainer faster than a round: a handover every d, the trainer hidden', () => {
    const d = 2,
      T = 0.5,
      S = 5,
      B = 2,
      n = 4;
    const r = oracleSchedule(same(50, n, d), { workers: n * B, batch_size: B, max_staleness: 1, train_s: T, steps: S });
    expect(r.handover_s).toEqual([2, 4, 6, 8, 10]);
    expect(r.wall_s).toBeCloseTo(S * d + T, 9);
    expect(r.groups_dropped).toBe(0);
    expect(r.waste_fraction).toBe(0);
  });

  it('async (bound 1), trainer slower than a round: trainer-bound at d + S·T, and what runs past the bound is dropped', () => {
    const d = 1,
      T = 3,
      S = 4,
      B = 2,
      n = 2;
    const r = oracleSchedule(same(200, n, d), { workers: n * B, batch_size: B, max_staleness: 1, train_s: T, steps: S });
    expect(r.handover_s).toEqual([1, 4, 7, 10]);
    expect(r.wall_s).toBeCloseTo(d + S * T, 9);
    expect(r.informative_groups_per_s).toBeCloseTo((S * B) / (d + S * T), 9);
    // Version-0 groups made during the first training step beyond the batch are dropped at handover 1.
    expect(r.groups_dropped).toBeGreaterThan(0);
    expect(r.waste_fraction).toBeGreaterThan(0);
  });

  it('worker-bound: one group at a time, no trainer time, loose bound: B·S·d', () => {
    const d = 0.25,
      S = 3,
      B = 4,
      n = 3;
    const r = oracleSchedule(same(100, n, d), { workers: n, batch_size: B, max_staleness: 100, train_s: 0, steps: S });
    expect(r.wall_s).toBeCloseTo(B * S * d, 9);
    expect(r.utilization).toBeCloseTo(1, 9);
  });

  it('zero-variance groups cost their rollouts: alternating informative and filtered doubles the work', () => {
    const d = 1,
      S = 2,
      B = 3,
      n = 2;
    const list: OracleGroup[] = [];
    for (let i = 0; i < 40; i++) list.push({ durations: [d, d], informative: i % 2 === 0 });
    const r = oracleSchedule(list, { workers: n, batch_size: B, max_staleness: 100, train_s: 0, steps: S });
    // The B·S-th informative group is list item 2(B·S − 1); groups run one after the other.
    expect(r.wall_s).toBeCloseTo((2 * B * S - 1) * d, 9);
  });

  it('sync drops the groups still running at a handover, and frees their workers at once', () => {
    // n = 1, 2 workers, B = 1: the slow first group (10 s) is overtaken by the fast second one (1 s).
    const list: OracleGroup[] = [{ durations: [10], informative: true }, ...same(20, 1, 1)];
    const r = oracleSchedule(list, { workers: 2, batch_size: 1, max_staleness: 0, train_s: 0, steps: 3 });
    expect(r.handover_s[0]).toBe(1);
    expect(r.groups_dropped).toBeGreaterThanOrEqual(1);
    // Each later step: two 1 s groups start together; the first to finish is handed over, the other dropped.
    expect(r.wall_s).toBeCloseTo(3, 9);
    // The slow group's first second is waste.
    expect(r.waste_fraction).toBeGreaterThan(0);
  });

  it('replays the list cyclically when the ideal needs more groups than the run finished', () => {
    const r = oracleSchedule(same(1, 1, 1), { workers: 1, batch_size: 2, max_staleness: 1, train_s: 0, steps: 3 });
    expect(r.wall_s).toBeCloseTo(6, 9);
    expect(r.groups_admitted).toBeGreaterThanOrEqual(6);
  });

  it('refuses a list without an informative group', () => {
    expect(() => oracleSchedule(same(5, 2, 1, false), { workers: 2, batch_size: 1, max_staleness: 1, train_s: 0, steps: 1 })).toThrow(
      /no informative group/,
    );
  });
});

describe('replayCoordinator (the real DapoCore on the measured groups, zero overhead)', () => {
  const eq = (count: number, n: number, d: number) =>
    Array.from({ length: count }, () => ({ durations: new Array(n).fill(d), rewards: [1, 0, 0, 0].slice(0, n) }));

  it('sync: each step takes d + T, as the oracle says when one round fills the workers', () => {
    const d = 2,
      T = 0.5,
      S = 3,
      B = 2,
      n = 4;
    const r = replayCoordinator(eq(50, n, d), {
      config: { mode: 'sync', n, batch_size: B },
      workers: n * B,
      capacity: n * B,
      train_s: T,
      steps: S,
    });
    expect(r.wall_s).toBeCloseTo(S * (d + T), 9);
  });

  it('async + carry-over: a handover every d, the trainer hidden, as the oracle', () => {
    const d = 2,
      T = 0.5,
      S = 4,
      B = 2,
      n = 4;
    const r = replayCoordinator(eq(50, n, d), {
      config: { mode: 'async', carry_over: true, max_staleness: 1, n, batch_size: B },
      workers: n * B,
      capacity: n * B,
      train_s: T,
      steps: S,
    });
    const o = oracleSchedule(
      eq(50, n, d).map((g) => ({ durations: g.durations, informative: true })),
      { workers: n * B, batch_size: B, max_staleness: 1, train_s: T, steps: S },
    );
    expect(r.wall_s).toBeCloseTo(S * d + T, 9);
    expect(o.wall_s).toBeCloseTo(r.wall_s, 9);
  });

  it('admits whole groups only: with n + 1 workers one worker always idles, where the oracle uses it', () => {
    const d = 1,
      S = 2,
      B = 3,
      n = 2;
    const groups = eq(60, n, d);
    const r = replayCoordinator(groups, {
      config: { mode: 'async', carry_over: true, max_staleness: 5, n, batch_size: B },
      workers: n + 1,
      capacity: n + 1,
      train_s: 0,
      steps: S,
    });
    // One group at a time: B·S groups of d each.
    expect(r.wall_s).toBeCloseTo(B * S * d, 9);
    expect(r.utilization).toBeCloseTo(n / (n + 1), 9);
    const o = oracleSchedule(
      groups.map((g) => ({ durations: g.durations, informative: true })),
      { workers: n + 1, batch_size: B, max_staleness: 5, train_s: 0, steps: S },
    );
    expect(o.wall_s).toBeLessThan(r.wall_s);
  });

  it('with delays: sync steps lengthen by the round trip and the weight update, each exactly once', () => {
    const d = 2,
      T = 0.5,
      S = 3,
      B = 2,
      n = 4;
    const r = replayCoordinator(eq(50, n, d), {
      config: { mode: 'sync', n, batch_size: B },
      workers: n * B,
      capacity: n * B,
      train_s: T,
      steps: S,
      delays: { submit_s: 0.1, result_s: 0.2, update_s: 0.3 },
    });
    // A round: out 0.1, run d, back 0.2; then the trainer T and, before the next round, the update 0.3.
    // The last step's update ends the run, as in the bench's wall.
    expect(r.wall_s).toBeCloseTo(S * (0.1 + d + 0.2 + T + 0.3), 9);
    expect(r.handover_s).toEqual([0, 1, 2].map((k) => expect.closeTo(k * (0.1 + d + 0.2 + T + 0.3) + 0.1 + d + 0.2, 9)));
  });

  it('with a cancel delay: a cancelled job holds its worker until the confirmation', () => {
    const d = 10,
      n = 2;
    // Async without carry-over, n workers, 2n in flight: the first handover (t = 1) cancels the
    // second group as it starts; its jobs hold the workers until the confirmation, so the third
    // group, queued behind them, starts and ends cancel_s later.
    const groups = [
      { durations: [1, 1], rewards: [1, 0] },
      { durations: [d, d], rewards: [1, 0] },
      { durations: [1, 1], rewards: [1, 0] },
    ];
    const run = (cancel_s: number) =>
      replayCoordinator(groups, {
        config: { mode: 'async', carry_over: false, max_staleness: 1, n, batch_size: 1 },
        workers: n,
        capacity: 2 * n,
        train_s: 0,
        steps: 2,
        delays: { cancel_s },
      });
    expect(run(0).wall_s).toBeCloseTo(2, 9);
    expect(run(0.5).wall_s).toBeCloseTo(2.5, 9);
  });
});

describe('Recorder (what the oracle and the replay are fed)', () => {
  it('keeps every group with n results, the cancelled ones as uninformative with the time they ran', () => {
    const rec = new Recorder();
    const res = (id: string, reward: number, run_s: number, critical: 'cancelled' | null = null) => {
      const r = makeResult(id, reward, 5, critical);
      return { ...r, timing: { ...r.timing, run_s } };
    };
    rec.add('b-g0-r0', res('b-g0-r0', 1, 1));
    rec.add('b-g0-r1', res('b-g0-r1', 0, 2));
    // Cancelled as too stale: one rollout had ended, the other ran 3 s before the cancel.
    rec.add('b-g1-r0', res('b-g1-r0', 1, 4));
    rec.add('b-g1-r1', res('b-g1-r1', 0, 3, 'cancelled'));
    // Still one result short: not a group the oracle can replay.
    rec.add('b-g2-r0', res('b-g2-r0', 1, 1));
    expect(rec.oracleGroups(2)).toEqual([
      { durations: [1, 2], informative: true },
      { durations: [4, 3], informative: false },
    ]);
    expect(rec.replayGroups(2)).toEqual([
      { durations: [1, 2], rewards: [1, 0] },
      { durations: [4, 3], rewards: [0, 0] },
    ]);
  });
});
