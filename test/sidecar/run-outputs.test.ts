import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseTrainConfig } from '../../src/dapo/config.js';
import { withRunOutputs } from '../../src/dapo/metrics-sidecar-run.js';
import { withMetrics } from '../../src/dapo/metrics-sidecar.js';
import { CoordinatorMetrics } from '../../src/dapo/metrics.js';
import type { SidecarBackend, SidecarLog } from '../../src/sidecar/types.js';
import { scriptedBackend } from './fixtures/scripted-backend.mjs';

// The sidecar's run directory: the files `raas train` writes, per batch handed to the trainer; a
// resumed coordinator appends from its step; a new one moves the earlier run aside.
const dir = mkdtempSync(path.join(tmpdir(), 'raas-sidecar-outputs-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const cfg = parseTrainConfig({ name: 'sc', dataset: { path: 'unused.jsonl' }, batch_size: 2, n: 2 });
const lines: string[] = [];
const log: SidecarLog = { info: (m) => lines.push(m), warn: (m) => lines.push(`warn: ${m}`), error: (m) => lines.push(`error: ${m}`) };
const run = path.join(dir, 'sc');
const jsonl = (f: string): Array<Record<string, number>> =>
  readFileSync(path.join(run, f), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
const summary = () => JSON.parse(readFileSync(path.join(run, 'summary.json'), 'utf8'));
const signal = new AbortController().signal;

describe('raas sidecar run outputs', () => {
  it('writes metrics.jsonl, summary.json, plot.svg and config.json per batch; batches.jsonl with keepBatches', async () => {
    const backend = withRunOutputs(scriptedBackend() as SidecarBackend, cfg, { dir: run, keepBatches: true, log });
    const c = await backend.start(signal);
    for (let i = 0; i < 3; i++) await c.nextBatch({});
    expect(jsonl('metrics.jsonl').map((r) => r.step)).toEqual([0, 1, 2]);
    expect(jsonl('batches.jsonl').map((r) => r.step)).toEqual([0, 1, 2]);
    expect(summary()).toMatchObject({ status: 'running', steps_done: 3, source: 'raas sidecar' });
    expect(readFileSync(path.join(run, 'plot.svg'), 'utf8')).toMatch(/^<svg[\s\S]*raas sidecar sc: per step/);
    expect(JSON.parse(readFileSync(path.join(run, 'config.json'), 'utf8')).name).toBe('sc');
    await c.close({ cancel: false });
    expect(summary().status).toBe('finished');
  });

  it('a resumed coordinator appends from its step, dropping what the earlier process recorded after it', async () => {
    const backend = withRunOutputs(scriptedBackend() as SidecarBackend, cfg, { dir: run, keepBatches: true, log });
    const c = await backend.resume({ step: 1, policy_version: 1 }, signal);
    await c.nextBatch({});
    expect(jsonl('metrics.jsonl').map((r) => r.step)).toEqual([0, 1]);
    expect(jsonl('batches.jsonl').map((r) => r.step)).toEqual([0, 1]);
    expect(summary().steps.map((s: { step: number }) => s.step)).toEqual([0, 1]);
    await c.close();
  });

  it('a new coordinator of the same name moves the earlier files aside; without keepBatches no batches.jsonl', async () => {
    const backend = withRunOutputs(scriptedBackend() as SidecarBackend, cfg, { dir: run, keepBatches: false, log });
    const c = await backend.start(signal);
    await c.nextBatch({});
    expect(readdirSync(run).filter((f) => f.startsWith('previous-'))).toHaveLength(1);
    expect(existsSync(path.join(run, 'batches.jsonl'))).toBe(false);
    expect(jsonl('metrics.jsonl').map((r) => r.step)).toEqual([0]);
    await c.close();
    expect(lines.some((l) => /were moved to .*previous-/.test(l))).toBe(true);
    expect(lines.filter((l) => l.startsWith('warn'))).toEqual([]);
  });

  it('close({cancel: false}) reaches the coordinator through both wrappers (a resume re-attaches to the jobs)', async () => {
    const scripted = scriptedBackend() as SidecarBackend & { state: { cancels: boolean[] } };
    const backend = withMetrics(withRunOutputs(scripted, cfg, { dir: run, keepBatches: false, log }), new CoordinatorMetrics());
    const c = await backend.start(signal);
    await c.nextBatch({});
    await c.close({ cancel: false });
    expect(scripted.state.cancels).toEqual([false]);
  });
});
