import { afterAll, describe, expect, it } from 'vitest';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Batch } from '../../src/protocol/batch.js';
import { ROOT, chatDataset } from './helpers.js';

const dir = mkdtempSync(path.join(tmpdir(), 'raas-dapo-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const dataset = chatDataset(80, dir);

function config(name: string, extra: string): string {
  const f = path.join(dir, `${name}.yaml`);
  writeFileSync(
    f,
    `name: ${name}\nseed: 4\nembedded: {backends: 1, sim: {latency: {decode_ms_per_token: 0.2}}}\ndataset: {path: ${dataset}}\nn: 4\nbatch_size: 2\nsteps: 2\noutput_dir: ${dir}/runs\n${extra}`,
  );
  return f;
}

/** Runs the built CLI; resolves with its exit code and output. `onStderr` may act on progress. */
function raas(
  args: string[],
  onStderr?: (text: string, child: ReturnType<typeof spawn>) => void,
): Promise<{ code: number | null; stdout: string; stderr: string; pid: number }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(ROOT, 'dist/src/cli.js'), ...args], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (c: Buffer) => (stdout += c));
    child.stderr!.on('data', (c: Buffer) => {
      stderr += c;
      onStderr?.(stderr, child);
    });
    child.on('close', (code) => resolve({ code, stdout, stderr, pid: child.pid! }));
  });
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('raas train (the built CLI, embedded)', () => {
  it('never deletes an earlier run: a run that fails at start leaves it in place, a new run moves it aside', async () => {
    const ok = config('keep', '');
    expect((await raas(['train', ok])).code).toBe(0);
    const run = path.join(dir, 'runs', 'keep');
    const first = readFileSync(path.join(run, 'batches.jsonl'), 'utf8');
    // Same name, a typo inside embedded.sim: the run fails at start and must not touch the outputs.
    const bad = path.join(dir, 'keep-bad.yaml');
    writeFileSync(bad, readFileSync(ok, 'utf8').replace('sim: {latency', 'sim: {bogus_key: 1, latency'));
    const failed = await raas(['train', bad]);
    expect(failed.code).not.toBe(0);
    expect(readFileSync(path.join(run, 'batches.jsonl'), 'utf8')).toBe(first);
    // A run that starts moves the earlier outputs into previous-<time>/ and says so.
    const again = await raas(['train', ok]);
    expect(again.code).toBe(0);
    const moved = /moved to (\S+)/.exec(again.stderr)?.[1];
    expect(moved, again.stderr).toBeDefined();
    expect(readFileSync(path.join(moved!, 'batches.jsonl'), 'utf8')).toBe(first);
    expect(existsSync(path.join(moved!, 'summary.json'))).toBe(true);
  }, 120_000);

  it('runs the trainer command per step, applies its last stdout line, writes the run files', async () => {
    const command = `echo "trained {step}" >&2; echo '{"version": 5, "weight_version": "ckpt-{step}"}'`;
    const cfg = config('cmd', `trainer:\n  command: ${JSON.stringify(command)}\n`);
    const r = await raas(['train', cfg]);
    expect(r.stderr).not.toMatch(/raas: /);
    expect(r.code).toBe(0);
    const run = path.join(dir, 'runs', 'cmd');
    const lines = readFileSync(path.join(run, 'batches.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => Batch.parse(JSON.parse(l)));
    expect(lines.map((b) => b.step)).toEqual([0, 1]);
    expect(lines[1].policy_version).toBe(5); // the command's {"version": 5} after step 0
    expect(Batch.parse(JSON.parse(readFileSync(path.join(run, 'batches', 'step-1.json'), 'utf8'))).step).toBe(1);
    const summary = JSON.parse(readFileSync(path.join(run, 'summary.json'), 'utf8'));
    expect(summary.steps).toHaveLength(2);
    expect(readFileSync(path.join(run, 'plot.svg'), 'utf8')).toMatch(/^<svg/);
    expect(r.stderr).toMatch(/step {3}0 \| v0/);
  });

  it('a failing trainer command stops the run with its exit code and stderr tail', async () => {
    const cfg = config('fail', `trainer:\n  command: echo "CUDA out of memory at step {step}" >&2; exit 3\n`);
    const r = await raas(['train', cfg]);
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/exit code 3/);
    expect(r.stderr).toMatch(/CUDA out of memory at step 0/);
    expect(existsSync(path.join(dir, 'runs', 'fail', 'batches', 'step-1.json'))).toBe(false);
  });

  it('Ctrl-C cancels in-flight jobs and leaves no process behind', async () => {
    const cfg = config('sigint', 'trainer:\n  command: sleep 31.25\n');
    let sent = false;
    const r = await raas(['train', cfg], (text, child) => {
      if (!sent && /step {3}0 \|/.test(text)) {
        sent = true; // the trainer command (sleep 31.25) is running, and so are carried-over rollouts
        setTimeout(() => child.kill('SIGINT'), 200);
      }
    });
    expect(sent).toBe(true);
    expect(r.code).toBe(130);
    // Embedded servers end with the run; the checkpoint and summary say where it stopped.
    expect(r.stderr).toMatch(/interrupted; the embedded servers and their jobs were stopped; continue with: raas train --resume /);
    expect(JSON.parse(readFileSync(path.join(dir, 'runs', 'sigint', 'summary.json'), 'utf8'))).toMatchObject({
      status: 'interrupted',
      steps_asked: 2,
      steps_done: 0,
    });
    expect(JSON.parse(readFileSync(path.join(dir, 'runs', 'sigint', 'checkpoint.json'), 'utf8'))).toMatchObject({
      format: 'raas.train/1',
      steps_done: 0,
    });
    expect(alive(r.pid)).toBe(false);
    await new Promise((res) => setTimeout(res, 300));
    const ps = execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' });
    expect(ps).not.toMatch(/sleep 31\.25/); // the trainer command's process group was stopped too
  });
});
