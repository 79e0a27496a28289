import { describe, expect, it } from 'vitest';
import { parseTrainConfig } from '../../src/dapo/config.js';
import { DapoCore } from '../../src/dapo/core.js';
import { PromptDataset } from '../../src/dapo/dataset.js';
import type { Result } from '../../src/protocol/process.js';
import { makeResult } from './des.js';

/**
 * What the core keeps of a result until its group is handed over: without return_messages the
 * trajectory's text is dropped on arrival (the batch has no use for it), and everything a batch,
 * acceptance or a checkpoint reads stays.
 */
function core(over: Record<string, unknown>): DapoCore {
  const cfg = parseTrainConfig({ name: 'mem', n: 2, batch_size: 1, dataset: { path: 'x' }, ...over }, 'test');
  const rows = Array.from({ length: 4 }, (_, i) => ({ data_source: 'chat', instance_id: i }));
  const clock = { now: () => 0, setTimeout: () => 0, clearTimeout: () => {} };
  return new DapoCore(cfg, new PromptDataset(rows, { shuffle: false }, 0), clock, 100);
}

function talk(jobId: string, reward: number): Result {
  return {
    ...makeResult(jobId, reward, 3),
    messages: [
      { role: 'user', content: 'solve it' },
      { role: 'assistant', content: 'a long answer '.repeat(50) },
    ],
    trailing_messages: [{ role: 'tool', content: 'a long tool output '.repeat(50) }],
  };
}

describe('DapoCore memory per result', () => {
  it('drops messages on arrival unless batches carry them; rewards, tokens and timing stay', () => {
    for (const [over, kept] of [
      [{}, false],
      [{ return_messages: true }, true],
      [{ sampling_params: { return_messages: true } }, true],
    ] as const) {
      const c = core(over);
      const [g] = c.admit();
      const sent = g!.requests.map((r, k) => talk(r.job_id!, k));
      c.onResult(g!.requests[0]!.job_id!, sent[0]!);
      const stored = g!.results[0]!;
      expect(stored.messages.length > 0).toBe(kept);
      expect(stored.trailing_messages !== undefined).toBe(kept);
      expect(stored.tokens).toEqual(sent[0]!.tokens);
      expect(stored.timing).toEqual(sent[0]!.timing);
      expect(stored.reward).toBe(0);
      // The result the caller handed in is left as it was.
      expect(sent[0]!.messages).toHaveLength(2);
      c.onResult(g!.requests[1]!.job_id!, sent[1]!);
      const { batch } = c.handover();
      const rollouts = batch.groups[0]!.rollouts;
      expect(rollouts.map((r) => r.reward)).toEqual([0, 1]);
      expect(rollouts[0]!.tokens).toEqual(sent[0]!.tokens);
      if (kept) expect(rollouts[0]!.messages).toHaveLength(3);
      else expect('messages' in rollouts[0]!).toBe(false);
    }
  });
});
