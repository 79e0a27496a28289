import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Batch } from '../../src/protocol/batch.js';
import { SidecarAnswer, SidecarEvent } from '../../src/protocol/sidecar.js';
import { startRolloutServer } from '../../src/server/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * The real `raas sidecar` process (dist/src/cli.js) driving the real coordinator against a real
 * rollout server and a simulated vLLM backend started here, so the test can read what the backend
 * generated (its request log) and compare it with the batches' token ids.
 */
describe('raas sidecar on the DAPO coordinator (rollout server + simulated backend on port 0)', () => {
  let sim: SimHandle;
  let server: { url: string; close(): Promise<void> };
  let dir: string;
  let child: ChildProcess;
  const lines: any[] = [];
  let stderr = '';
  let exit: Promise<[number | null, string | null]>;
  let nextId = 1;

  const request = (op: string, params: Record<string, unknown> = {}): Promise<any> => {
    const id = nextId++;
    child.stdin!.write(JSON.stringify({ id, op, ...params }) + '\n');
    return new Promise((resolve, reject) => {
      const t = setInterval(() => {
        const a = lines.find((l) => 'ok' in l && l.id === id);
        if (a) {
          clearInterval(t);
          resolve(a);
        } else if (child.exitCode !== null) {
          clearInterval(t);
          reject(new Error(`sidecar exited (${child.exitCode}); stderr:\n${stderr}`));
        }
      }, 5);
    });
  };

  beforeAll(async () => {
    sim = await startSim({ seed: 3, request_log: 100_000, filler: { median_tokens: 12, sigma: 0.5, min_tokens: 2, max_tokens: 40 } });
    server = await startRolloutServer({ port: 0, host: '127.0.0.1' });
    dir = mkdtempSync(path.join(os.tmpdir(), 'raas-sidecar-'));
    const config = path.join(dir, 'train.yaml');
    writeFileSync(
      config,
      [
        'name: sidecar-it',
        'seed: 5',
        `servers: [{url: "${server.url}"}]`,
        `backends: [{address: "${sim.url}", api: vllm}]`,
        `dataset: {path: "${path.join(root, 'test/sidecar/fixtures/chat.jsonl')}"}`,
        'n: 4',
        'batch_size: 2',
        'steps: 3',
        'return_messages: true',
        'sampling_params: {max_tokens_per_turn: 32, seed: 11}',
        `output_dir: "${path.join(dir, 'runs')}"`,
      ].join('\n'),
    );
    child = spawn(process.execPath, [path.join(root, 'dist/src/cli.js'), 'sidecar', '--config', config, '--progress-interval-s', '0.05'], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString('utf8');
      let nl: number;
      while ((nl = out.indexOf('\n')) >= 0) {
        const obj = JSON.parse(out.slice(0, nl)); // stdout carries protocol lines only
        out = out.slice(nl + 1);
        if ('event' in obj) SidecarEvent.parse(obj);
        else SidecarAnswer.parse(obj);
        lines.push(obj);
      }
    });
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
    exit = new Promise((resolve) => child.once('exit', (code, sig) => resolve([code, sig])));
  });

  afterAll(async () => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    await server?.close();
    await sim?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('serves three steps whose token ids are exactly what the backend generated, resumes, evaluates, shuts down cleanly', async () => {
    const hello = await request('hello');
    expect(hello.result).toMatchObject({ batch_size: 2, group_size: 4, name: 'sidecar-it' });
    const bad = await request('fly');
    expect(bad.error.code).toBe('unknown_op');

    for (let step = 0; step < 3; step++) {
      const a = await request('next_batch', { timeout_s: 60 });
      if (!a.ok) throw new Error(`${a.error.code}: ${a.error.message}\n${stderr}`);
      const batch = Batch.parse(a.result);
      expect(batch.step).toBe(step);
      expect(batch.policy_version).toBe(step);
      expect(batch.groups).toHaveLength(2);
      for (const g of batch.groups) {
        expect(g.rollouts).toHaveLength(4);
        for (const r of g.rollouts) checkAgainstBackend(r, sim);
      }
      const u = await request('update_weights');
      expect(u.result).toEqual({ policy_version: step + 1 });
    }
    const status = await request('status');
    expect(status.result.state).toBe('running');
    expect(status.result.coordinator.policy_version).toBe(3);
    const state = (await request('checkpoint')).result.state;
    expect(state.format).toBe('raas.coordinator/1');
    // a trainer restart: the coordinator is replaced by one restored from the state
    const resumed = await request('resume', { state });
    if (!resumed.ok) throw new Error(`${resumed.error.code}: ${resumed.error.message}`);
    expect(resumed.result.status.policy_version).toBe(3);
    const after = await request('next_batch', { timeout_s: 60 });
    expect(Batch.parse(after.result).step).toBe(3);
    const wrong = await request('resume', { state: { ...state, name: 'another-run' } });
    expect(wrong.error.code).toBe('config_invalid');

    const report = await request('eval', { n: 1 });
    if (!report.ok) throw new Error(`${report.error.code}: ${report.error.message}`);
    expect(report.result.overall).toMatchObject({ prompts: 12, rollouts: 12 });

    const bye = await request('shutdown');
    // A checkpoint was taken, so by default the jobs in flight are kept for a resume.
    expect(bye).toEqual({ id: bye.id, ok: true, result: { closed: true, jobs: 'kept' } });
    expect(await exit).toEqual([0, null]);
  }, 120_000);
});

/**
 * Every model-generated run of response ids must be one backend answer, given the sequence up to
 * that point as its prompt: the ids reach the trainer untouched and earlier turns are never re-tokenised.
 */
function checkAgainstBackend(r: Batch['groups'][number]['rollouts'][number], sim: SimHandle): void {
  const t = r.tokens;
  expect(t.response_mask).toHaveLength(t.response_ids.length);
  expect(t.logprobs).toHaveLength(t.response_ids.length);
  const assistantSpans = (t.spans ?? []).filter((s) => r.messages?.[s.message_index]?.role === 'assistant');
  expect(assistantSpans.length).toBe(r.num_turns);
  for (const s of assistantSpans) {
    const prompt = [...t.prompt_ids, ...t.response_ids.slice(0, s.start)];
    const generated = t.response_ids.slice(s.start, s.end);
    expect(t.response_mask.slice(s.start, s.end).every((m) => m === 1)).toBe(true);
    const entry = sim.requestLog.find(
      (e) => e.prompt_ids.length === prompt.length && e.prompt_ids.every((x, i) => x === prompt[i]) && sameIds(e.ids, generated),
    );
    expect(entry, `${r.job_id}: no backend answer matches the span [${s.start}, ${s.end})`).toBeDefined();
    expect(t.logprobs.slice(s.start, s.end)).toEqual(entry!.logprobs);
    expect(r.messages![s.message_index]!.token_ids).toEqual(generated);
  }
  // observation ids carry mask 0 and logprob 0
  t.response_mask.forEach((m, i) => m === 0 && expect(t.logprobs[i]).toBe(0));
}

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
