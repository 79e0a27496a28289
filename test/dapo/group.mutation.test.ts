import { describe, expect, it } from 'vitest';
import { makeResult } from './des.js';
import { parseTrainConfig } from '../../src/dapo/config.js';
import {
  batchMessages,
  groupId,
  groupRequests,
  jobId,
  judgeGroup,
  resultTokens,
  toBatchGroup,
  type GroupRecord,
} from '../../src/dapo/group.js';
import type { Result } from '../../src/protocol/process.js';
import type { Prompt } from '../../src/dapo/dataset.js';

// What a group of n rollouts is to the coordinator (docs/training.md): its requests, its verdict, and
// its view in a batch. Each test states one rule of the contract.

const prompt: Prompt = { data_source: 'chat', instance_id: 'p7', pass_rate: 0.5 };

function record(results: Result[], over: Partial<GroupRecord> = {}): GroupRecord {
  return {
    index: 3,
    id: 'r-g3',
    prompt,
    requests: [],
    submittedVersion: 2,
    submittedStep: 0,
    state: 'running',
    results,
    ended: results.length,
    tokens: 0,
    ...over,
  };
}

describe('group requests', () => {
  it('sends n requests with deterministic ids, trajectory ids 0..n-1, the version and the config seed', () => {
    const cfg = parseTrainConfig({ name: 'r', n: 3, seed: 11, dataset: { path: 'x' }, sampling_params: { temperature: 0.7 } });
    const reqs = groupRequests(cfg, prompt, 4, 9);
    expect(reqs.map((r) => r.job_id)).toEqual(['r-g4-r0', 'r-g4-r1', 'r-g4-r2']);
    expect(reqs.map((r) => r.job_id)).toEqual([0, 1, 2].map((k) => jobId('r', 4, k)));
    expect(reqs.every((r) => r.group_id === groupId('r', 4) && r.group_id === 'r-g4')).toBe(true);
    expect(reqs.map((r) => r.instance)).toEqual([0, 1, 2].map((k) => ({ ...prompt, trajectory_id: k })));
    expect(reqs.every((r) => r.policy_version === 9)).toBe(true);
    // The run's seed fills in for a sampling seed the config leaves out; the other sampling params go through.
    expect(reqs[0].sampling_params).toMatchObject({ temperature: 0.7, seed: 11 });
    // No timeout in the config: the server's default applies (the key is absent, not undefined).
    expect('timeout_s' in reqs[0]).toBe(false);
  });

  it('keeps an explicit sampling seed (0 included) and forwards timeout_s', () => {
    const cfg = parseTrainConfig({ name: 'r', n: 2, seed: 11, timeout_s: 30, dataset: { path: 'x' }, sampling_params: { seed: 0 } });
    const reqs = groupRequests(cfg, prompt, 0, 0);
    expect(reqs.map((r) => r.sampling_params?.seed)).toEqual([0, 0]);
    expect(reqs.map((r) => r.timeout_s)).toEqual([30, 30]);
  });
});

describe('resultTokens', () => {
  it('counts model-generated tokens (mask 1) only, and 0 for a result without tokens', () => {
    const r = makeResult('a', 1, 0);
    r.tokens = { prompt_ids: [1], response_ids: [5, 6, 7, 8], response_mask: [1, 0, 0, 1], logprobs: [-1, 0, 0, -1] };
    expect(resultTokens(r)).toBe(2);
    const bare = { ...makeResult('b', 1, 3), tokens: undefined } as unknown as Result;
    expect(resultTokens(bare)).toBe(0);
  });
});

describe('judgeGroup', () => {
  it('drops a group with an errored rollout under on_error: drop_group', () => {
    const cfg = parseTrainConfig({ name: 'r', n: 2, dataset: { path: 'x' } });
    const g = record([makeResult('a', 1, 3), makeResult('b', 0, 3, 'run')]);
    expect(judgeGroup(g, cfg)).toBe('dropped_error');
    expect(g.rewards).toBeUndefined();
  });

  it('scores an errored rollout 0 under on_error: zero_reward, which can make the group informative', () => {
    const cfg = parseTrainConfig({ name: 'r', n: 2, dataset: { path: 'x' }, on_error: 'zero_reward' });
    const g = record([makeResult('a', 1, 3), { ...makeResult('b', 1, 3, 'run') }]);
    expect(judgeGroup(g, cfg)).toBe('accepted');
    expect(g.rewards).toEqual([1, 0]);
  });

  it('drops a group with a rollout marked filter (unreliable reward) under either on_error', () => {
    for (const on_error of ['drop_group', 'zero_reward'] as const) {
      const cfg = parseTrainConfig({ name: 'r', n: 2, dataset: { path: 'x' }, on_error });
      const g = record([makeResult('a', 1, 3), { ...makeResult('b', 0, 3), filter: true, filter_reason: 'eval_log_truncated' }]);
      expect(judgeGroup(g, cfg)).toBe('dropped_error');
      expect(g.rewards).toBeUndefined();
      // the same group unmarked is informative and accepted
      expect(judgeGroup(record([makeResult('a', 1, 3), makeResult('b', 0, 3)]), cfg)).toBe('accepted');
      // ProRL's not_finished mark (max turns, max tokens) keeps the group: that reward is a fact
      const long = { ...makeResult('b', 0, 3), filter: true, filter_reason: 'not_finished' };
      expect(judgeGroup(record([makeResult('a', 1, 3), long]), cfg)).toBe('accepted');
    }
  });

  it('filters a group whose task rewards are all equal', () => {
    const cfg = parseTrainConfig({ name: 'r', n: 2, dataset: { path: 'x' } });
    expect(judgeGroup(record([makeResult('a', 1, 3), makeResult('b', 1, 5)]), cfg)).toBe('filtered');
  });
});

describe('toBatchGroup', () => {
  const cfg = parseTrainConfig({ name: 'r', n: 2, dataset: { path: 'x' } });

  it('states staleness against the handover version and falls back to the slot for a missing trajectory id', () => {
    const a = { ...makeResult('r-g3-r0', 1, 3), trajectory_id: 0 };
    const b = { ...makeResult('r-g3-r1', 0, 3), trajectory_id: null, weight_versions: undefined } as unknown as Result;
    const g = record([a, b]);
    expect(judgeGroup(g, cfg)).toBe('accepted');
    const bg = toBatchGroup(g, 5, false);
    expect(bg).toMatchObject({ group_id: 'r-g3', instance_id: 'p7', data_source: 'chat' });
    expect(bg.rollouts.map((r) => [r.job_id, r.trajectory_id, r.policy_version, r.staleness])).toEqual([
      ['r-g3-r0', 0, 2, 3],
      ['r-g3-r1', 1, 2, 3],
    ]);
    // Without overlong shaping the shaped reward is the reward; advantages are group-relative.
    expect(bg.rollouts.map((r) => r.shaped_reward)).toEqual([1, 0]);
    expect(bg.rollouts.map((r) => r.advantage)).toEqual([expect.closeTo(0.7071, 3), expect.closeTo(-0.7071, 3)]);
    // A result that names no weight versions is listed with none (not undefined).
    expect(bg.rollouts.map((r) => r.weight_versions)).toEqual([['0'], []]);
    expect(bg.rollouts.every((r) => !('messages' in r))).toBe(true);
    expect(toBatchGroup(g, 5, true).rollouts[0].messages).toEqual([]);
  });
});

describe('batchMessages', () => {
  it('appends trailing messages and cuts each assistant span out of the training view', () => {
    const r = makeResult('a', 1, 0);
    r.messages = [
      { role: 'user', content: 'q' },
      { role: 'assistant', content: 'a1' },
      { role: 'tool', content: 'obs' },
    ];
    r.trailing_messages = [{ role: 'assistant', content: 'a2' }];
    r.tokens = {
      prompt_ids: [1],
      response_ids: [10, 11, 50, 12],
      response_mask: [1, 1, 0, 1],
      logprobs: [-1, -2, 0, -3],
      spans: [
        { message_index: 1, start: 0, end: 2 },
        { message_index: 2, start: 2, end: 3 },
        { message_index: 3, start: 3, end: 4 },
      ],
    } as Result['tokens'];
    const all = batchMessages(r);
    expect(all.map((m) => m.content)).toEqual(['q', 'a1', 'obs', 'a2']);
    expect(all[1]).toMatchObject({ role: 'assistant', token_ids: [10, 11], logprobs: [-1, -2] });
    expect(all[3]).toMatchObject({ role: 'assistant', token_ids: [12], logprobs: [-3] });
    // Only assistant messages carry token ids; the result itself is left as it was.
    expect(all[2]).toEqual({ role: 'tool', content: 'obs' });
    expect(r.messages[1]).toEqual({ role: 'assistant', content: 'a1' });
  });

  it('keeps token ids an assistant message already carries, and works without spans or trailing messages', () => {
    const r = makeResult('a', 1, 0);
    r.messages = [{ role: 'assistant', content: 'x', token_ids: [1], logprobs: [-9] } as Result['messages'][number]];
    r.tokens = {
      prompt_ids: [],
      response_ids: [4, 5],
      response_mask: [1, 1],
      logprobs: [-1, -1],
      spans: [{ message_index: 0, start: 0, end: 2 }],
    } as Result['tokens'];
    expect(batchMessages(r)[0]).toMatchObject({ token_ids: [1], logprobs: [-9] });
    const plain = makeResult('b', 1, 2);
    plain.messages = [{ role: 'user', content: 'q' }];
    const out = batchMessages(plain);
    expect(out).toEqual([{ role: 'user', content: 'q' }]);
    expect(out).not.toBe(plain.messages);
    // a span that names no message (a trimmed list) is skipped
    const past = makeResult('c', 1, 2);
    past.messages = [{ role: 'assistant', content: 'a' }];
    past.tokens = {
      ...past.tokens,
      spans: [
        { message_index: 3, start: 0, end: 1 },
        { message_index: 0, start: 1, end: 2 },
      ],
    } as Result['tokens'];
    const cut = batchMessages(past);
    expect(cut).toHaveLength(1);
    expect(cut[0]).toMatchObject({ token_ids: [7], logprobs: [-0.5] });
  });
});
