// raas train --resume on the built CLI (embedded: the run's own rollout server and simulators) and
// the run directory's reopening: a failed step is run again, the outputs are appended to, never
// moved aside, and what an unfinished step had begun to write is cut off.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync, appendFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { RunWriter, readTrainCheckpoint } from '../../src/dapo/run-writer.js';
import { planResume } from '../../src/dapo/resume.js';
import { ROOT, chatDataset } from './helpers.js';

const dir = mkdtempSync(path.join(tmpdir(), 'raas-dapo-resume-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const dataset = chatDataset(80, dir);

function raas(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(ROOT, 'dist/src/cli.js'), ...args], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (c: Buffer) => (stdout += c));
    child.stderr!.on('data', (c: Buffer) => (stderr += c));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const lines = (f: string): Array<{ step: number; groups: Array<{ group_id: string }> }> =>
  readFileSync(f, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));

describe('raas train --resume (built CLI, embedded)', () => {
  it('a run whose trainer command failed at step 1 resumes there, appends to its outputs and finishes; a finished run is not run again', async () => {
    const cfg = path.join(dir, 'fail-once.yaml');
    // The command fails once at step 1 (a crashed trainer), then succeeds.
    const command = 'if [ {step} = 1 ] && [ ! -f {run_dir}/failed-once ]; then touch {run_dir}/failed-once; exit 3; fi';
    writeFileSync(
      cfg,
      `name: fail-once\nseed: 4\nembedded: {backends: 1, sim: {latency: {decode_ms_per_token: 0.2}}}\ndataset: {path: ${dataset}}\nn: 4\nbatch_size: 2\nsteps: 3\noutput_dir: ${dir}/runs\ntrainer:\n  command: ${JSON.stringify(command)}\n`,
    );
    const run = path.join(dir, 'runs', 'fail-once');
    const first = await raas(['train', cfg]);
    expect(first.code, first.stderr).toBe(3);
    expect(first.stderr).toMatch(new RegExp(`continue the run with: raas train --resume ${run}`));
    expect(JSON.parse(readFileSync(path.join(run, 'summary.json'), 'utf8'))).toMatchObject({
      status: 'failed',
      steps_asked: 3,
      steps_done: 1,
    });
    // Step 1's batch was written before its command failed; the checkpoint is the one of step 0.
    expect(lines(path.join(run, 'batches.jsonl')).map((b) => b.step)).toEqual([0, 1]);
    expect((await readTrainCheckpoint(run)).steps_done).toBe(1);
    expect(JSON.parse(readFileSync(path.join(run, 'config.json'), 'utf8')).name).toBe('fail-once');

    // No config on the command line: the run directory's config.json is used.
    const second = await raas(['train', '--resume', run]);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stderr).toMatch(/step 1 had not finished before the interruption; it runs again/);
    expect(second.stderr).toMatch(/resuming "fail-once" at step 1 of 3/);
    expect(second.stderr).not.toMatch(/moved to/);
    const batches = lines(path.join(run, 'batches.jsonl'));
    expect(batches.map((b) => b.step)).toEqual([0, 1, 2]);
    const groups = batches.flatMap((b) => b.groups.map((g) => g.group_id));
    expect(new Set(groups).size).toBe(groups.length);
    expect(readdirSync(run).filter((f) => f.startsWith('previous-'))).toEqual([]);
    const summary = JSON.parse(readFileSync(path.join(run, 'summary.json'), 'utf8'));
    expect(summary).toMatchObject({ status: 'finished', steps_asked: 3, steps_done: 3, resumes: 1 });
    expect(summary.steps.map((s: { step: number }) => s.step)).toEqual([0, 1, 2]);

    const third = await raas(['train', '--resume', run]);
    expect(third.code).toBe(0);
    expect(third.stderr).toMatch(/already finished 3 steps of 3; ask for more with --steps/);
    expect(lines(path.join(run, 'batches.jsonl'))).toHaveLength(3);
    // --steps extends a finished run.
    const more = await raas(['train', '--resume', run, '--steps', '4']);
    expect(more.code, more.stderr).toBe(0);
    expect(lines(path.join(run, 'batches.jsonl')).map((b) => b.step)).toEqual([0, 1, 2, 3]);
  }, 180_000);

  it('refuses a run directory without a checkpoint, a config of another run, and --output-dir, naming the fix', async () => {
    const empty = path.join(dir, 'runs', 'nothing');
    mkdirSync(empty, { recursive: true });
    const r = await raas(['train', '--resume', empty]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/no checkpoint\.json there; raas train writes it/);
    const none = await raas(['train']);
    expect(none.stderr).toMatch(/give a training config \(raas train <config>\) or a run to continue/);
    const out = await raas(['train', '--resume', empty, '--output-dir', dir]);
    expect(out.stderr).toMatch(/--output-dir: not with --resume/);
    const smoke = await raas(['train', '--resume', empty, '--smoke']);
    expect(smoke.stderr).toMatch(/--smoke: not with --resume/);
  }, 60_000);
});

describe('RunWriter.reopen and planResume', () => {
  it('cuts batches.jsonl back to the checkpoint, removes later step files, keeps the finished rows', async () => {
    const cfg = path.join(dir, 'plain.yaml');
    writeFileSync(
      cfg,
      `name: plain\nseed: 4\nembedded: {backends: 1, sim: {latency: {decode_ms_per_token: 0.2}}}\ndataset: {path: ${dataset}}\nn: 4\nbatch_size: 2\nsteps: 2\noutput_dir: ${dir}/runs\n`,
    );
    expect((await raas(['train', cfg])).code).toBe(0);
    const run = path.join(dir, 'runs', 'plain');
    const ck = await readTrainCheckpoint(run);
    expect(ck).toMatchObject({ steps_done: 2, steps_asked: 2, batch_files: ['batches/step-0.json', 'batches/step-1.json'] });
    const before = readFileSync(path.join(run, 'batches.jsonl'), 'utf8');
    // A later step that was killed half-way through its writes.
    appendFileSync(path.join(run, 'batches.jsonl'), '{"step": 2, "groups": [');
    writeFileSync(path.join(run, 'batches', 'step-2.json'), '{}');
    const w = new RunWriter(run);
    expect(await w.reopen(ck)).toEqual({ dropped_steps: [2] });
    expect(readFileSync(path.join(run, 'batches.jsonl'), 'utf8')).toBe(before);
    expect(existsSync(path.join(run, 'batches', 'step-2.json'))).toBe(false);
    expect(w.steps.map((s) => s.step)).toEqual([0, 1]);
    expect(w.bytes).toBe(Buffer.byteLength(before));

    // The config's name must be the run's: job ids derive from it.
    const other = path.join(dir, 'other.yaml');
    writeFileSync(other, readFileSync(cfg, 'utf8').replace('name: plain', 'name: other'));
    const { loadTrainConfig } = await import('../../src/dapo/config.js');
    await expect(planResume(run, loadTrainConfig(other))).rejects.toMatchObject({
      code: 'config_invalid',
      message: expect.stringMatching(/name "other" differs from the run's "plain"/),
    });
    // Keys the checkpoint's groups were built from cannot change under a resume.
    const bigger = path.join(dir, 'bigger.yaml');
    writeFileSync(bigger, readFileSync(cfg, 'utf8').replace('n: 4', 'n: 8'));
    await expect(planResume(run, loadTrainConfig(bigger))).rejects.toMatchObject({
      code: 'config_invalid',
      message: expect.stringMatching(/key "n" is 8 in the given config but 4 in the run's config.json/),
    });
    expect((await planResume(run, loadTrainConfig(cfg))).cfg.name).toBe('plain');
    // A truncated batches.jsonl (changed by hand) is refused rather than appended to.
    writeFileSync(path.join(run, 'batches.jsonl'), '');
    await expect(new RunWriter(run).reopen(ck)).rejects.toMatchObject({ code: 'config_invalid' });
  }, 60_000);
});
