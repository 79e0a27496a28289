import { describe, expect, it, beforeAll, afterAll } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parquetWriteFile } from 'hyparquet-writer';
import { groupAdvantages, overlongPenalty, shapedReward, ADVANTAGE_EPS } from '../../src/dapo/rewards.js';
import { loadDataset, PromptDataset } from '../../src/dapo/dataset.js';
import { loadTrainConfig, parseTrainConfig } from '../../src/dapo/config.js';
import { RaasError } from '../../src/protocol/errors.js';

const OVER = { enabled: true, max_tokens: 100, buffer: 20, penalty_factor: 1 };

describe('overlong shaping and advantages at their boundaries', () => {
  it('penalises nothing up to L_max − L_cache, linearly to −factor at L_max, −factor beyond', () => {
    expect(overlongPenalty(80, OVER)).toBe(0);
    expect(overlongPenalty(81, OVER)).toBeCloseTo(-0.05);
    expect(overlongPenalty(90, OVER)).toBeCloseTo(-0.5);
    expect(overlongPenalty(100, OVER)).toBeCloseTo(-1);
    expect(overlongPenalty(101, OVER)).toBe(-1);
    expect(overlongPenalty(101, { ...OVER, penalty_factor: 0.5 })).toBe(-0.5);
    expect(overlongPenalty(101, { ...OVER, buffer: 0 })).toBe(-1);
    expect(overlongPenalty(100, { ...OVER, buffer: 0 })).toBe(0);
    expect(overlongPenalty(10_000, { ...OVER, enabled: false })).toBe(0);
    expect(shapedReward(1, 90, OVER)).toBeCloseTo(0.5);
  });

  it('normalises by the sample standard deviation plus 1e-6, as veRL', () => {
    const a = groupAdvantages([1, 0, 0, 0]);
    const mean = 0.25;
    const std = Math.sqrt((0.75 ** 2 + 3 * 0.25 ** 2) / 3);
    expect(a[0]).toBeCloseTo((1 - mean) / (std + ADVANTAGE_EPS), 12);
    expect(a[1]).toBeCloseTo((0 - mean) / (std + ADVANTAGE_EPS), 12);
    expect(a.reduce((x, y) => x + y, 0)).toBeCloseTo(0, 12);
    expect(groupAdvantages([1, 1, 1])).toEqual([0, 0, 0]);
    expect(groupAdvantages([0.5])).toEqual([0.5 / (1 + ADVANTAGE_EPS)]);
    expect(groupAdvantages([])).toEqual([]);
  });
});

describe('datasets', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'raas-dapo-ds-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('shuffles by seed per epoch, stops after epochs, and resumes from a cursor', () => {
    const rows = Array.from({ length: 10 }, (_, i) => ({ data_source: 'chat', instance_id: i }));
    const a = new PromptDataset(rows, { shuffle: true, epochs: 2 }, 42);
    const first = Array.from({ length: 10 }, () => a.next()!.instance_id);
    const second = Array.from({ length: 10 }, () => a.next()!.instance_id);
    expect(new Set(first).size).toBe(10);
    expect(first).not.toEqual(second); // a new order each epoch
    expect(first).not.toEqual(rows.map((r) => r.instance_id));
    expect(a.next()).toBeUndefined();
    expect(a.exhausted).toBe(true);
    const b = new PromptDataset(rows, { shuffle: true, epochs: 2 }, 42, { epoch: 1, index: 3 });
    expect(Array.from({ length: 7 }, () => b.next()!.instance_id)).toEqual(second.slice(3));
    const c = new PromptDataset(rows, { shuffle: true }, 43);
    expect(Array.from({ length: 10 }, () => c.next()!.instance_id)).not.toEqual(first);
  });

  it('reads JSONL and veRL-format Parquet rows', async () => {
    const jsonl = path.join(dir, 'd.jsonl');
    writeFileSync(jsonl, '{"task":"chat","instance_id":"a","turns":1}\n\n{"data_source":"chat","turns":2}\n');
    const d = await loadDataset({ path: jsonl, shuffle: false }, 0);
    expect(d.rows).toEqual([
      { data_source: 'chat', instance_id: 'a', turns: 1 },
      { data_source: 'chat', instance_id: 1, turns: 2 },
    ]);
    const pq = path.join(dir, 'd.parquet');
    parquetWriteFile({
      filename: pq,
      columnData: [
        { name: 'data_source', data: ['openai/gsm8k', 'openai/gsm8k'], type: 'STRING' },
        { name: 'prompt', data: [[{ role: 'user', content: '1+1?' }], [{ role: 'user', content: '2+2?' }]] },
        {
          name: 'reward_model',
          data: [
            { style: 'rule', ground_truth: '2' },
            { style: 'rule', ground_truth: '4' },
          ],
        },
        {
          name: 'extra_info',
          data: [
            { index: 7, split: 'train' },
            { index: 8, split: 'train' },
          ],
        },
      ],
    });
    const p = await loadDataset({ path: pq, shuffle: false, data_source: 'math' }, 0);
    expect(p.rows[0]).toMatchObject({
      data_source: 'math',
      instance_id: 7,
      prompt: [{ role: 'user', content: '1+1?' }],
      reward_model: { ground_truth: '2' },
    });
    expect(p.rows[1].instance_id).toBe(8);
  });

  it('names the file and line of a bad JSONL row', async () => {
    const bad = path.join(dir, 'bad.jsonl');
    writeFileSync(bad, '{"data_source":"chat"}\nnot json\n');
    await expect(loadDataset({ path: bad, shuffle: false }, 0)).rejects.toThrow(/line 2 is not JSON/);
  });
});

describe('training config errors name the key and the expected value', () => {
  it('rejects bad values and unknown keys with their path', () => {
    const err = (x: unknown): string => {
      try {
        parseTrainConfig(x, 'x.yaml');
      } catch (e) {
        expect(e).toBeInstanceOf(RaasError);
        expect((e as RaasError).code).toBe('config_invalid');
        return (e as Error).message;
      }
      throw new Error('no error');
    };
    expect(err({ dataset: { path: 'a' }, mode: 'fast' })).toMatch(/x\.yaml: `mode`: .*"async"\|"sync"/);
    expect(err({ dataset: { path: 'a' }, batch_size: -1 })).toMatch(/`batch_size`: too small.*>0.*got -1/i);
    expect(err({ dataset: { path: 'a' }, n: 'eight' })).toMatch(/`n`: wrong type: expected number, got "eight"/);
    expect(err({})).toMatch(/`dataset`: required/);
    expect(err({ dataset: { path: 'a', shufle: true } })).toMatch(/`dataset\.shufle`: unknown key; did you mean `shuffle`\?/);
    expect(err({ dataset: { path: 'a' }, overlong: { enabled: 'yes' } })).toMatch(
      /`overlong\.enabled`: wrong type: expected boolean, got "yes"/,
    );
  });

  it('loads YAML and resolves the dataset against the config directory', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'raas-dapo-cfg-'));
    try {
      const f = path.join(dir, 'c.yaml');
      writeFileSync(f, 'name: x\ndataset:\n  path: data/d.jsonl\nn: 2\n');
      const cfg = loadTrainConfig(f);
      expect(cfg.dataset.path).toBe(path.join(dir, 'data/d.jsonl'));
      expect(cfg).toMatchObject({ n: 2, batch_size: 32, mode: 'async', carry_over: true, max_staleness: 1, on_error: 'drop_group' });
      writeFileSync(f, '- a\n- b\n');
      expect(() => loadTrainConfig(f)).toThrow(/expected a mapping/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
