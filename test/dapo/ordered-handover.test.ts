import { describe, expect, it } from 'vitest';
import { makeResult } from './des.js';
import { DapoCore } from '../../src/dapo/core.js';
import { PromptDataset } from '../../src/dapo/dataset.js';
import { parseTrainConfig } from '../../src/dapo/config.js';

// ordered_handover (docs/training.md, Reproducibility): a batch never depends on finish order.
describe('ordered_handover', () => {
  const clock = { now: () => 0, setTimeout: () => 0, clearTimeout: () => {} };
  const setup = (ordered: boolean) => {
    const cfg = parseTrainConfig({ name: 'o', n: 2, batch_size: 2, ordered_handover: ordered, dataset: { path: 'x' } });
    const rows = [0, 1, 2, 3].map((i) => ({ data_source: 'chat', instance_id: i }));
    const core = new DapoCore(cfg, new PromptDataset(rows, { shuffle: false }, 0), clock, 8);
    const gs = core.admit();
    const end = (i: number, rewards: [number, number]) => {
      core.onResult(gs[i]!.requests[0]!.job_id!, makeResult('x', rewards[0], 3));
      core.onResult(gs[i]!.requests[1]!.job_id!, makeResult('y', rewards[1], 3));
    };
    return { core, end };
  };

  it('waits for earlier groups: the batch is the first accepted groups in submission order, whatever finished first', () => {
    for (const ordered of [false, true]) {
      const { core, end } = setup(ordered);
      end(3, [1, 0]); // accepted
      end(2, [0, 1]); // accepted, while 0 and 1 still run
      expect(core.ready()).toBe(!ordered);
      if (!ordered) {
        expect(core.handover().batch.groups.map((g) => g.group_id)).toEqual(['o-g2', 'o-g3']);
        continue;
      }
      end(0, [1, 1]); // filtered
      expect(core.ready()).toBe(false); // group 1 may still come before 2
      end(1, [1, 0]); // accepted: it takes its place in submission order
      expect(core.ready()).toBe(true);
      expect(core.handover().batch.groups.map((g) => g.group_id)).toEqual(['o-g1', 'o-g2']);
    }
  });

  it('does not wait for groups submitted after the last one chosen', () => {
    const { core, end } = setup(true);
    end(0, [1, 0]);
    end(1, [0, 1]);
    expect(core.ready()).toBe(true); // 2 and 3 still run
  });
});
