// The prompt history survives every way a run continues: Coordinator.checkpoint() → resume (what
// the sidecar's checkpoint/resume ops do), and `raas train --resume` (checkpoint.json, prompts.jsonl).
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Coordinator } from '../../src/dapo/coordinator.js';
import { parseTrainConfig } from '../../src/dapo/config.js';
import { PromptRecord } from '../../src/dapo/history.js';
import { dapoBackend } from '../../src/sidecar/dapo-backend.js';
import { StderrLog } from '../../src/sidecar/log.js';
import { harness } from '../sidecar/helpers.js';
import { ROOT } from './helpers.js';

const dir = mkdtempSync(path.join(tmpdir(), 'raas-dapo-history-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** 40 chat prompts: a third never solved, a third always, a third half the time. */
const data = path.join(dir, 'mixed.jsonl');
writeFileSync(
  data,
  Array.from({ length: 40 }, (_, i) => JSON.stringify({ data_source: 'chat', instance_id: `m${i}`, pass_rate: [0, 1, 0.5][i % 3] })).join(
    '\n',
  ) + '\n',
);
const base = {
  seed: 3,
  dataset: { path: data },
  n: 4,
  batch_size: 3,
  steps: 6,
  embedded: { backends: 1, sim: { latency: { decode_ms_per_token: 0.1 } }, server: { workers: { run: 8 } } },
  selection: { mode: 'history' as const, initial_keep: 0.2 },
};

const groupsOf = (records: PromptRecord[]): number => records.reduce((a, r) => a + r.groups.length, 0);

describe('prompt history across checkpoint and resume', () => {
  it("Coordinator.checkpoint() carries every prompt's groups and the selector state; Coordinator.resume keeps and extends them", async () => {
    const cfg = parseTrainConfig({ ...base, name: 'hist-api' });
    const a = new Coordinator(cfg, { onWarning: () => {} });
    let state: ReturnType<typeof a.checkpoint>;
    try {
      for (let s = 0; s < 3; s++) {
        await a.nextBatch();
        await a.updateWeights({});
      }
      state = a.checkpoint();
    } finally {
      await a.close({ cancel: false });
    }
    const prompts = state.prompts!;
    expect(groupsOf(prompts)).toBeGreaterThanOrEqual(9);
    for (const r of prompts) {
      expect(() => PromptRecord.parse(r)).not.toThrow();
      for (const g of r.groups) expect(g.rewards.length + g.errors).toBe(4);
    }
    // what the history says matches the task: m0, m3, ... never solved; m1, m4, ... always
    for (const r of prompts) {
      const i = Number(String(r.instance_id).slice(1));
      for (const g of r.groups) {
        if (i % 3 === 0) expect(g.rewards.every((x) => x === 0)).toBe(true);
        if (i % 3 === 1) expect(g.rewards.every((x) => x === 1)).toBe(true);
      }
    }
    expect(state.selector).toBeDefined();
    const json = JSON.parse(JSON.stringify(state)) as unknown;
    const b = Coordinator.resume(cfg, json, { onWarning: () => {} });
    try {
      await b.start();
      const restored = b.promptHistory();
      // the resumed history starts from the checkpoint's (results that ended meanwhile may add groups)
      for (const r of prompts) {
        const now = restored.find((x) => x.instance_id === r.instance_id)!;
        expect(now.groups.slice(0, r.groups.length)).toEqual(r.groups);
        expect(now.skips).toBeGreaterThanOrEqual(r.skips);
      }
      await b.nextBatch();
      expect(groupsOf(b.promptHistory())).toBeGreaterThan(groupsOf(prompts));
      expect(b.checkpoint().selector).toBeDefined();
    } finally {
      await b.close();
    }
  }, 120_000);

  it("the sidecar's checkpoint answer holds the history, and its resume op continues with it", async () => {
    const cfg = parseTrainConfig({ ...base, name: 'hist-sidecar' });
    const backend = dapoBackend(cfg, { configDir: dir, log: new StderrLog('error', () => {}) });
    const h = harness(backend);
    h.send({ id: 1, op: 'next_batch' });
    expect((await h.answer(1)).ok).toBe(true);
    h.send({ id: 2, op: 'update_weights' });
    await h.answer(2);
    h.send({ id: 3, op: 'next_batch' });
    expect((await h.answer(3)).ok).toBe(true);
    h.send({ id: 4, op: 'checkpoint' });
    const state = (await h.answer(4)).result.state as { prompts: PromptRecord[] };
    expect(groupsOf(state.prompts)).toBeGreaterThanOrEqual(6);
    h.send({ id: 5, op: 'resume', state });
    const resumed = await h.answer(5);
    expect(resumed.ok, JSON.stringify(resumed)).toBe(true);
    h.send({ id: 6, op: 'checkpoint' });
    const again = (await h.answer(6)).result.state as { prompts: PromptRecord[] };
    expect(groupsOf(again.prompts)).toBeGreaterThanOrEqual(groupsOf(state.prompts));
    h.send({ id: 7, op: 'shutdown' });
    h.end();
    await h.done;
  }, 120_000);

  it('raas train writes prompts.jsonl and the selection figures in metrics.jsonl; --resume keeps the history', async () => {
    const file = path.join(dir, 'hist-cli.yaml');
    const command = 'if [ {step} = 3 ] && [ ! -f {run_dir}/failed-once ]; then touch {run_dir}/failed-once; exit 3; fi';
    writeFileSync(file, JSON.stringify({ ...base, name: 'hist-cli', output_dir: path.join(dir, 'runs'), trainer: { command } }));
    const raas = (args: string[]) =>
      new Promise<{ code: number | null; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, [path.join(ROOT, 'dist/src/cli.js'), ...args], {
          cwd: dir,
          stdio: ['ignore', 'ignore', 'pipe'],
        });
        let stderr = '';
        child.stderr!.on('data', (c: Buffer) => (stderr += c));
        child.on('close', (code) => resolve({ code, stderr }));
      });
    const run = path.join(dir, 'runs', 'hist-cli');
    const first = await raas(['train', file]);
    expect(first.code, first.stderr).toBe(3);
    const read = (): PromptRecord[] =>
      readFileSync(path.join(run, 'prompts.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => PromptRecord.parse(JSON.parse(l)));
    const before = read();
    const ck = JSON.parse(readFileSync(path.join(run, 'checkpoint.json'), 'utf8')) as { coordinator: { prompts: PromptRecord[] } };
    expect(groupsOf(ck.coordinator.prompts)).toBeGreaterThan(0);
    const second = await raas(['train', '--resume', run]);
    expect(second.code, second.stderr).toBe(0);
    const after = read();
    // every group the checkpoint had is still there, in order, and the resumed steps added more
    for (const r of ck.coordinator.prompts) {
      const now = after.find((x) => x.instance_id === r.instance_id)!;
      expect(now.groups.slice(0, r.groups.length)).toEqual(r.groups);
    }
    expect(groupsOf(after)).toBeGreaterThan(groupsOf(ck.coordinator.prompts));
    expect(before.length).toBeGreaterThan(0);
    const metrics = readFileSync(path.join(run, 'metrics.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, number>);
    expect(metrics.map((m) => m.step)).toEqual([0, 1, 2, 3, 4, 5]);
    for (const m of metrics) {
      for (const k of [
        'skipped',
        'skipped_easy',
        'skipped_hard',
        'prompts_visited',
        'visited_share',
        'prompts_seen',
        'prompts_mixed',
        'prompts_none_solved',
        'prompts_all_solved',
        'keep_easy',
        'keep_hard',
        'mean_group_size',
      ])
        expect(typeof m[k], k).toBe('number');
      expect(m.skipped).toBe(m.skipped_easy + m.skipped_hard);
      // The mean n of the groups submitted during the step (none in a step served from groups admitted earlier).
      expect(m.mean_group_size).toBe(m.submitted > 0 ? 4 : 0);
    }
    // the uniform third of the prompts gets skipped once it has history
    expect(metrics.reduce((a, m) => a + m.skipped, 0)).toBeGreaterThan(0);
    const summary = JSON.parse(readFileSync(path.join(run, 'summary.json'), 'utf8')) as {
      selection: string;
      prompts: { dataset_size: number; prompts_visited: number };
    };
    expect(summary.selection).toBe('history');
    expect(summary.prompts.dataset_size).toBe(40);
  }, 180_000);
});
