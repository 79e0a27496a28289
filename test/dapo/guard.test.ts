import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseTrainConfig } from '../../src/dapo/config.js';
import { DEFAULT_GROUPS_PER_BATCH, StepGuard, groupLimit } from '../../src/dapo/guard.js';
import { StepWindow } from '../../src/dapo/window.js';
import { RaasError } from '../../src/protocol/errors.js';
import { ROOT } from './helpers.js';
import { runDes } from './des.js';

// A run in which no group is informative must end with an error that names the knob and what was
// seen, with a warning well before; veRL's DAPO recipe raises after max_num_gen_batches:
// verl@246cac4c recipe/dapo/dapo_ray_trainer.py:273-284; NeMo RL after dynamic_sampling_max_gen_batches
// (default 10): RL@7ea279ab nemo_rl/algorithms/grpo.py:284-286, 1803-1811.

describe('StepGuard', () => {
  const cfg = (extra: Record<string, unknown> = {}) => parseTrainConfig({ dataset: { path: 'x' }, batch_size: 4, ...extra });
  const window = (accepted: number, filtered: number, at: Array<[number, number]> = [[0, filtered]]) => {
    const w = new StepWindow(0);
    w.accepted = accepted;
    w.filtered = filtered;
    w.submitted = accepted + filtered + 3;
    for (const [v, c] of at) w.uniformAt.set(v, c);
    return w;
  };
  it("defaults to 30 × batch_size (veRL's recipe: 10 generation batches of 3 × train_batch_size); 0 is no limit", () => {
    expect(DEFAULT_GROUPS_PER_BATCH).toBe(30);
    expect(groupLimit(cfg())).toBe(120);
    expect(groupLimit(cfg({ max_groups_per_step: 0 }))).toBe(0);
    expect(new StepGuard(cfg({ max_groups_per_step: 0 })).check(window(0, 10_000), 0, false)).toEqual({});
  });
  it('warns once per step at a third of the limit, then fails at the limit naming the knob and what was seen', () => {
    const g = new StepGuard(cfg({ max_groups_per_step: 30 }));
    expect(g.check(window(1, 8), 2, false)).toEqual({});
    const first = g.check(window(1, 9), 2, false);
    expect(first.warning).toBe(
      'step 2: 10 groups finished and too few were informative: submitted 13, accepted 1 of batch_size=4, filtered 9 (rewards all 0 in 9 groups), dropped on error 0; the step ends with an error at max_groups_per_step=30',
    );
    expect(g.check(window(1, 12), 2, false)).toEqual({});
    expect(g.check(window(1, 12), 3, false).warning).toMatch(/^step 3:/);
    const { error } = g.check(
      window(2, 28, [
        [0, 25],
        [1, 3],
      ]),
      3,
      false,
    );
    expect(error).toBeInstanceOf(RaasError);
    expect(error!.code).toBe('no_informative_groups');
    expect(error!.message).toContain(
      'step 3: 30 groups finished without batch_size=4 informative ones (max_groups_per_step=30): submitted 33, accepted 2 of batch_size=4, filtered 28 (rewards all 0 in 25 groups, all 1 in 3 groups), dropped on error 0.',
    );
    expect(error!.message).toContain('raise max_groups_per_step (0: no limit)');
  });
  it('says nothing while a batch is ready', () => {
    expect(new StepGuard(cfg({ max_groups_per_step: 3 })).check(window(0, 50), 0, true)).toEqual({});
  });
});

describe('DapoCore on a dataset whose reward is always 0 (discrete-event fleet)', () => {
  it('ends the step with no_informative_groups after max_groups_per_step groups, stops admitting, warned before', () => {
    const r = runDes({
      seed: 1,
      capacity: 16,
      steps: 3,
      prompts: 50,
      passRate: () => 0,
      config: { n: 4, batch_size: 4, max_groups_per_step: 24 },
    });
    expect(r.batches).toHaveLength(0);
    const err = r.core.stalled!;
    expect(err.code).toBe('no_informative_groups');
    expect(err.message).toMatch(
      /^step 0: 24 groups finished without batch_size=4 informative ones \(max_groups_per_step=24\): submitted \d+, accepted 0 of batch_size=4, filtered 24 \(rewards all 0 in 24 groups\)/,
    );
    expect(r.core.warnings).toHaveLength(1);
    expect(r.core.warnings[0]).toMatch(/^step 0: 8 groups finished and too few were informative/);
    const submitted = r.core.totals.groups_submitted;
    expect(r.core.admit()).toEqual([]);
    expect(r.core.totals.groups_submitted).toBe(submitted);
    // the groups still in flight when it stalled finish (at most (max_staleness + 1) × batch_size); none start after
    expect(submitted).toBeLessThanOrEqual(24 + 2 * 4);
  });
  it('a run that is merely hard (9 % of the groups informative) still gets its batches under the default limit', () => {
    const r = runDes({
      seed: 2,
      capacity: 32,
      steps: 3,
      prompts: 400,
      passRate: (i) => (i % 10 === 0 ? 0.5 : 0),
      config: { n: 4, batch_size: 2 },
    });
    expect(r.batches).toHaveLength(3);
    expect(r.core.stalled).toBeUndefined();
  });
});

describe('raas train on a task whose reward is always 0 (the built CLI, embedded)', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'raas-dapo-guard-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('fails with the knob named and what was seen, warns before, and prints progress lines while stderr is not a terminal', async () => {
    const data = path.join(dir, 'zero.jsonl');
    writeFileSync(
      data,
      Array.from({ length: 30 }, (_, i) => JSON.stringify({ data_source: 'chat', instance_id: `z${i}`, pass_rate: 0 })).join('\n') + '\n',
    );
    const file = path.join(dir, 'zero.yaml');
    // ~0.3 s per rollout, 4 at a time: 60 rollouts take several seconds, enough for 1 s progress lines.
    writeFileSync(
      file,
      [
        'name: zero',
        'seed: 1',
        `dataset: {path: ${data}}`,
        'n: 2',
        'batch_size: 2',
        'steps: 2',
        'max_groups_per_step: 30',
        `output_dir: ${dir}/runs`,
        'embedded: {backends: 1, sim: {latency: {decode_ms_per_token: 6}, filler: {median_tokens: 48, sigma: 0}}, server: {workers: {run: 4}}}',
      ].join('\n') + '\n',
    );
    const r = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [path.join(ROOT, 'dist/src/cli.js'), 'train', file, '--progress-interval-s', '1'], {
        cwd: dir,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr!.on('data', (c: Buffer) => (stderr += c));
      child.on('close', (code) => resolve({ code, stderr }));
    });
    expect(r.code, r.stderr).not.toBe(0);
    expect(r.stderr).toMatch(
      /raas: warning: step 0: 10 groups finished and too few were informative: submitted \d+, accepted 0 of batch_size=2, filtered 10 \(rewards all 0 in 10 groups\)/,
    );
    expect(r.stderr).toMatch(/step 0: 30 groups finished without batch_size=2 informative ones \(max_groups_per_step=30\)/);
    expect(r.stderr).toMatch(
      /raas: step 0: 0\/2 groups ready, 0 accepted and \d+ filtered of \d+ submitted in this step \| \d+ jobs in flight \| \d+\.\d s/,
    );
    const summary = JSON.parse(readFileSync(path.join(dir, 'runs', 'zero', 'summary.json'), 'utf8')) as { status: string; error: string };
    expect(summary.status).toBe('failed');
    expect(summary.error).toMatch(/max_groups_per_step=30/);
    // the history of what it tried is kept: 30 prompts, each with groups of all-0 rewards
    const prompts = readFileSync(path.join(dir, 'runs', 'zero', 'prompts.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { groups: Array<{ rewards: number[]; verdict: string }> });
    expect(prompts.length).toBe(30);
    expect(prompts.flatMap((p) => p.groups).every((g) => g.verdict === 'filtered' && g.rewards.every((x) => x === 0))).toBe(true);
  }, 120_000);
});
