import { describe, expect, it } from 'vitest';
import { makeResult } from './des.js';
import { DapoCore } from '../../src/dapo/core.js';
import { PromptDataset } from '../../src/dapo/dataset.js';
import { parseTrainConfig } from '../../src/dapo/config.js';
import type { TrainConfigInput } from '../../src/protocol/config-train.js';

/** A core over 20 chat prompts with a hand-driven clock. */
function mkCore(cfg: Partial<TrainConfigInput>, capacity: number) {
  const c = parseTrainConfig({ name: 'a', dataset: { path: 'x' }, ...cfg });
  const rows = Array.from({ length: 20 }, (_, i) => ({ data_source: 'chat', instance_id: i }));
  const clock = {
    t: 0,
    now() {
      return this.t;
    },
    setTimeout: () => 0,
    clearTimeout: () => {},
  };
  return { core: new DapoCore(c, new PromptDataset(rows, { shuffle: false }, 0), clock, capacity), clock };
}

/** Ends every job of a group: rewards 1, 0, 1, 0… (an informative group). */
function finish(core: DapoCore, g: { requests: Array<{ job_id?: string }> }): void {
  g.requests.forEach((r, k) => core.onResult(r.job_id!, makeResult(r.job_id!, k % 2, 4)));
}

describe('DapoCore admission', () => {
  it('counts cancelling groups in the admission bound until their cancels are confirmed', () => {
    // max_staleness 0, batch_size 1: one group in the system at a time.
    const { core } = mkCore({ n: 2, batch_size: 1, max_staleness: 0 }, 16);
    const [g0] = core.admit();
    expect(core.admit()).toEqual([]);
    finish(core, g0);
    core.demand = true;
    expect(core.handover().cancels).toEqual([]);
    const [g1] = core.admit();
    expect(g1.index).toBe(1);
    // A weight update makes g1 too stale: it is cancelling until its two jobs confirm.
    const cancels = core.setVersion(1);
    expect(cancels).toEqual(g1.requests.map((r) => r.job_id));
    expect(core.cancellingGroups).toBe(1);
    expect(core.admit()).toEqual([]); // its place is still held
    core.onResult(cancels[0], makeResult(cancels[0], 0, 2, 'cancelled'));
    expect(core.admit()).toEqual([]);
    core.onResult(cancels[1], makeResult(cancels[1], 0, 2, 'cancelled'));
    expect(core.cancellingGroups).toBe(0);
    expect(core.admit().map((g) => g.index)).toEqual([2]);
    expect(core.totals.dropped_stale).toBe(1);
  });

  it('the capacity follows setCapacity: a lowered cap admits nothing until running jobs fall below it, a raised one admits at once', () => {
    const { core } = mkCore({ n: 2, batch_size: 4, max_staleness: 1 }, 8);
    const first = core.admit();
    expect(first).toHaveLength(4); // 8 jobs: the cap
    core.setCapacity(4); // a server with half the workers went down
    finish(core, first[0]);
    finish(core, first[1]);
    expect(core.runningJobs).toBe(4);
    expect(core.admit()).toEqual([]); // 4 + 2 > 4
    finish(core, first[2]);
    expect(core.admit()).toHaveLength(1); // 2 + 2 <= 4
    expect(core.admit()).toEqual([]);
    core.setCapacity(8); // it came back
    expect(core.admit()).toHaveLength(2);
    expect(core.runningJobs).toBe(8);
    // No live server at all: nothing is admitted while jobs run.
    core.setCapacity(0);
    expect(core.admit()).toEqual([]);
  });

  it('worker utilization integrates the cap over the window when it changes', () => {
    const { core, clock } = mkCore({ n: 2, batch_size: 1, max_staleness: 0 }, 4);
    const [g] = core.admit(); // 2 running jobs of cap 4
    clock.t = 1000;
    core.setCapacity(2); // 1 s at 2/4, then 1 s at 2/2
    clock.t = 2000;
    finish(core, g);
    core.demand = true;
    const { batch } = core.handover();
    // ∫ min(running, cap) = 2·1000 + 2·1000; ∫ cap = 4·1000 + 2·1000.
    expect(batch.stats.worker_utilization).toBeCloseTo(4000 / 6000, 6);
    expect(batch.stats.max_inflight_jobs).toBe(2);
  });
});
