import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import type { Batch, Rollout } from '../../src/protocol/batch.js';
import { RunDir } from '../../src/dapo/run-dir.js';
import { formatList, formatRollout } from '../../src/dapo/show.js';
import { toolDefinitions } from '../../src/server/handlers/common/tools.js';
import { qwen3Tokenizer } from '../../src/tokens/index.js';

// `raas show`: a rollout of a run as text, from token ids the real Qwen3 tokenizer made the way
// the agent loop makes them (prompt, model turn, observation ids, model turn).
const tok = qwen3Tokenizer();
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const dir = mkdtempSync(path.join(tmpdir(), 'raas-show-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const tools = toolDefinitions(['execute_ipython_cell', 'finish']);
const prompt = tok.renderPrompt(
  [
    { role: 'system', content: 'You solve math problems.' },
    { role: 'user', content: 'What is 17 * 23? Put your final answer within \\boxed{}.' },
  ],
  { tools, enableThinking: false },
);
const turn1 = tok.encode(
  'I will compute it.\n<tool_call>\n{"name": "execute_ipython_cell", "arguments": {"code": "print(17 * 23)"}}\n</tool_call><|im_end|>',
);
const obs = tok.observationIds([{ role: 'tool', content: '391' }], { enableThinking: false });
const turn2 = tok.encode(
  'The answer is $\\boxed{391}$.\n<tool_call>\n{"name": "finish", "arguments": {"answer": "391"}}\n</tool_call><|im_end|>',
);

function rollout(k: number, reward: number): Rollout {
  const response_ids = [...turn1, ...obs, ...turn2];
  const response_mask = [...turn1.map(() => 1 as const), ...obs.map(() => 0 as const), ...turn2.map(() => 1 as const)];
  const logprobs = response_mask.map((m, i) => (m ? -0.01 * (i % 7) : 0));
  return {
    job_id: `show-g3-r${k}`,
    trajectory_id: k,
    reward,
    shaped_reward: reward,
    advantage: reward ? 1 : -1,
    policy_version: 2,
    staleness: 1,
    weight_versions: ['2', '3'],
    finish_reason: 'finish',
    num_turns: 2,
    tokens: { prompt_ids: prompt, response_ids, response_mask, logprobs },
  };
}
const batch: Batch = {
  step: 1,
  policy_version: 3,
  groups: [{ group_id: 'show-g3', instance_id: 'math-017', data_source: 'math', rollouts: [rollout(0, 1), rollout(1, 0)] }],
  stats: {
    submitted: 1,
    completed: 1,
    accepted: 1,
    filtered: 0,
    cancelled: 0,
    carried_over: 1,
    errors: 0,
    dropped_stale: 0,
    staleness_histogram: { 1: 2 },
    wall_s: 1,
    worker_utilization: 1,
    tokens_generated: 10,
    tokens_used: 10,
  },
};

describe('formatRollout', () => {
  it('prints the prompt messages, each model turn with its tool call and logprob, each observation, mask and reward', () => {
    const text = formatRollout(batch, 'show-g3-r1', tok);
    const lines = text.split('\n');
    expect(lines[0]).toBe('step 1 (policy v3), rollout 1 of 2 (group 0 of 1)');
    expect(lines[1]).toBe('job show-g3-r1 · group show-g3 · instance math-017 · data_source math');
    expect(lines[2]).toBe('reward 0 · shaped 0 · advantage -1 · staleness 1 · finish finish · 2 turns · weight versions 2, 3');
    const gen = turn1.length + turn2.length;
    expect(lines[3]).toBe(
      `tokens: ${prompt.length} prompt, ${gen + obs.length} response (${gen} generated, mask 1; ${obs.length} observation, mask 0)`,
    );
    expect(text).toContain(`── prompt: ${prompt.length} ids`);
    expect(text).toContain('[system] You solve math problems.');
    expect(text).toContain('[user] What is 17 * 23? Put your final answer within \\boxed{}.');
    expect(text).toContain(`── model turn 1: ${turn1.length} ids, mask 1, mean logprob`);
    expect(text).toContain('  → tool call execute_ipython_cell {"code":"print(17 * 23)"}');
    expect(text).toContain(`── observation 1: ${obs.length} ids, mask 0`);
    expect(text).toContain('[tool] 391');
    expect(text).toContain(`── model turn 2: ${turn2.length} ids, mask 1`);
    expect(text).toContain('  → tool call finish {"answer":"391"}');
    // The generation prompt closing an observation is not a message of its own.
    expect(text).not.toContain('[assistant]');
  });

  it('--ids prints every id of every segment, and the logprobs of model turns', () => {
    const text = formatRollout(batch, '0', tok, { ids: true });
    const ids = text
      .split('\n')
      .filter((l) => l.startsWith('ids: '))
      .map((l) => l.slice(5).split(' ').map(Number));
    expect(ids).toEqual([prompt, turn1, obs, turn2]);
    const lps = text.split('\n').filter((l) => l.startsWith('logprobs: '));
    expect(lps).toHaveLength(2);
    expect(lps[0]!.split(' ')).toHaveLength(turn1.length + 1);
  });

  it('lists the rollouts, and names what exists when asked for a rollout that does not', () => {
    expect(formatList(batch).split('\n').slice(0, 3)).toEqual([
      'step 1 (policy v3): 1 groups, 2 rollouts',
      `   0  show-g3-r0  math-017  reward 1  adv 1  finish  2 turns  ${turn1.length + turn2.length} generated ids  staleness 1`,
      `   1  show-g3-r1  math-017  reward 0  adv -1  finish  2 turns  ${turn1.length + turn2.length} generated ids  staleness 1`,
    ]);
    expect(() => formatRollout(batch, '5', tok)).toThrow('step 1 has rollouts 0–1, not 5 (--list shows them)');
    expect(() => formatRollout(batch, 'nope', tok)).toThrow('step 1 has no rollout with job id "nope" (--list shows them)');
  });
});

describe('raas show on a run directory', () => {
  const run = path.join(dir, 'runs/show');
  mkdirSync(path.join(run, 'batches'), { recursive: true });
  const line = (step: number): string => JSON.stringify({ ...batch, step });
  writeFileSync(path.join(run, 'batches.jsonl'), `${line(0)}\n${line(1)}\n`);

  it('reads batches.jsonl without step files (a sidecar run with --keep-batches), the last step by default', async () => {
    const rd = new RunDir(run);
    expect(await rd.steps()).toEqual([0, 1]);
    expect((await rd.batch()).step).toBe(1);
    await expect(rd.batch(7)).rejects.toThrow(`${run}: no batch of step 7; the run has steps 0, 1`);
    await expect(new RunDir(path.join(dir, 'absent')).batch()).rejects.toThrow(/no such run directory/);
    mkdirSync(path.join(dir, 'empty'));
    await expect(new RunDir(path.join(dir, 'empty')).batch()).rejects.toThrow(/no batches: .*raas sidecar only with --keep-batches/);
  });

  it('the CLI prints a rollout, a list, and errors naming the fix', () => {
    const cli = path.join(ROOT, 'dist/src/cli.js');
    const r = spawnSync(process.execPath, [cli, 'show', run, '0', 'show-g3-r0'], { encoding: 'utf8', timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^step 0 \(policy v3\), rollout 0 of 2/);
    expect(r.stdout).toContain('  → tool call finish {"answer":"391"}');
    const l = spawnSync(process.execPath, [cli, 'show', run, '--list'], { encoding: 'utf8', timeout: 60_000 });
    expect(l.stdout.split('\n')[0]).toBe('step 1 (policy v3): 1 groups, 2 rollouts');
    const e = spawnSync(process.execPath, [cli, 'show', run, '3'], { encoding: 'utf8', timeout: 60_000 });
    expect(e.status).toBe(1);
    expect(e.stderr.split('\n')[0]).toBe(`raas: ${run}: no batch of step 3; the run has steps 0, 1`);
  }, 120_000);
});
