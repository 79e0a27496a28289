import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunWriter } from '../../src/dapo/run-writer.js';
import type { Batch } from '../../src/protocol/batch.js';
import { RunDir } from '../../src/ui/run-dir.js';

const rollout = (job: string, reward: number, advantage: number) => ({
  job_id: job,
  trajectory_id: 0,
  reward,
  shaped_reward: reward,
  advantage,
  policy_version: 0,
  staleness: 0,
  weight_versions: ['0'],
  finish_reason: 'finish' as const,
  num_turns: 1,
  tokens: { prompt_ids: [1, 2], response_ids: [3, 4, 5], response_mask: [1 as const, 1 as const, 0 as const], logprobs: [-0.1, -0.2, 0] },
  details: { answer: '1', ground_truth: '1' },
});
const batch = (step: number): Batch => ({
  step,
  policy_version: step,
  groups: [
    {
      group_id: `r-g${step}`,
      instance_id: `i${step}`,
      data_source: 'math',
      rollouts: [rollout(`r-g${step}-r0`, 1, 1), rollout(`r-g${step}-r1`, 0, -1)],
    },
  ],
  stats: {
    submitted: 2,
    completed: 2,
    accepted: 1,
    filtered: 1,
    cancelled: 0,
    carried_over: 0,
    errors: 0,
    dropped_stale: 0,
    staleness_histogram: { '0': 2 },
    wall_s: 1,
    worker_utilization: 0.5,
    tokens_generated: 4,
    tokens_used: 4,
    mean_reward: 0.5,
  },
});

// A run directory written by raas train's own writer (RunWriter), read back as raas view reads it.
describe('RunDir: the run view reads a run directory as it stands', () => {
  const root = mkdtempSync(path.join(tmpdir(), 'raas-rundir-'));
  let dir: string;
  beforeAll(async () => {
    const w = new RunWriter(root, 'r');
    dir = w.dir;
    await w.open();
    await w.writeBatch(batch(0));
    await w.writeSummary({ name: 'r' });
    await w.appendGroups([
      {
        step: 0,
        group_id: 'r-g7',
        instance_id: 'i7',
        data_source: 'math',
        verdict: 'filtered',
        policy_version: 0,
        rewards: [1, 1],
        errors: 0,
        rollouts: [
          { job_id: 'r-g7-r0', reward: 1, details: { answer: '2' } },
          { job_id: 'r-g7-r1', reward: 1 },
        ],
      },
    ]);
    // A step being written when the view looked: its batches.jsonl line is torn.
    appendFileSync(path.join(dir, 'batches.jsonl'), '{"step":1,"policy_ver');
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it("lists the steps (summary.json's rows when there is no metrics.jsonl) and the step files", async () => {
    const run = new RunDir(dir);
    await run.check();
    expect((await run.steps()).map((s) => [s.step, s.accepted])).toEqual([[0, 1]]);
    expect(await run.stepFiles()).toEqual([0]);
    writeFileSync(path.join(dir, 'metrics.jsonl'), '{"step":0,"mean_reward":0.5}\n{"step":1,"mean_re');
    expect(await run.steps()).toEqual([{ step: 0, mean_reward: 0.5 }]);
    const view = await run.view(null, 0);
    expect(view).toMatchObject({ name: 'r', step_files: [0], active: false, summary: { name: 'r' } });
  });

  it("shows a step's accepted groups and, from groups.jsonl, the ones that did not reach the batch", async () => {
    const run = new RunDir(dir);
    const s = await run.stepView(0);
    expect(s.rejected_source).toBe('groups.jsonl');
    expect(s.groups.map((g) => [g.group_id, g.verdict, g.rewards])).toEqual([
      ['r-g0', 'accepted', [1, 0]],
      ['r-g7', 'filtered', [1, 1]],
    ]);
    expect(s.groups[0]!.rollouts[1]).toMatchObject({ job_id: 'r-g0-r1', advantage: -1, response_tokens: 2, openable: true });
    const found = await run.rollout(0, 'r-g7-r0');
    expect(found.rollout.details).toEqual({ answer: '2' });
    await expect(run.rollout(0, 'nope')).rejects.toMatchObject({ code: 'job_not_found' });
    await expect(run.batch(1)).rejects.toMatchObject({ code: 'route_not_found' });
    await expect(run.batch(-1)).rejects.toMatchObject({ code: 'bad_request' });
  });

  it('falls back to prompts.jsonl for the groups outside the batch of a run without groups.jsonl', async () => {
    rmSync(path.join(dir, 'groups.jsonl'));
    writeFileSync(
      path.join(dir, 'prompts.jsonl'),
      `${JSON.stringify({ data_source: 'math', instance_id: 'i9', groups: [{ step: 0, version: 0, rewards: [0, 0], errors: 0, verdict: 'filtered' }] })}\n`,
    );
    const s = await new RunDir(dir).stepView(0);
    expect(s.rejected_source).toBe('prompts.jsonl');
    expect(s.groups[1]).toMatchObject({ instance_id: 'i9', verdict: 'filtered', rewards: [0, 0], rollouts: [] });
  });

  it('says what a run directory is when given something else', async () => {
    await expect(new RunDir(path.join(root, 'missing')).check()).rejects.toThrow(/does not exist: give a run directory/);
    await expect(new RunDir(root).check()).rejects.toThrow(/not \(yet\) a run directory/);
  });
});
