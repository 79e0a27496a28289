// Resume without re-running: the coordinator is killed and resumed with real
// processes — two `raas serve` rollout servers, two `raas sim-llm` backends, `raas train` and
// `raas sidecar` as child processes. The servers run a chat handler that appends each execution of a
// job (its INIT, which an attach never repeats) to a file per server, so the tests count rollouts
// where they run: every job id must have run exactly once, across both servers and both coordinator
// lives, and the batches must be contiguous steps without a duplicate group.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { observe } from './helpers/observe.js';
import { descendantsOf, waitGone } from '../helpers/procs.js';
import { CLI, ROOT, cliProcess, request, serveProcess, tempDir, until, type ServeProcess } from './helpers/servers.js';

const COUNTING = path.join(ROOT, 'test/reliability/fixtures/resume-count.mjs');

describe('resume: the coordinator killed and resumed, no rollout run twice', () => {
  const dir = tempDir('resume');
  const runsFiles = [path.join(dir, 'runs-a.txt'), path.join(dir, 'runs-b.txt')];
  const children: ServeProcess[] = [];
  let servers: string[] = [];
  let sims: string[] = [];
  const dataset = path.join(dir, 'chat.jsonl');

  beforeAll(async () => {
    // 16 tokens at 25 ms: a turn lasts about 0.4 s, so a step takes a few seconds and a kill lands mid-step.
    const simCfg = path.join(dir, 'sim.yaml');
    fs.writeFileSync(
      simCfg,
      'latency:\n  decode_ms_per_token: 25\nfiller:\n  median_tokens: 16\n  sigma: 0\n  min_tokens: 16\n  max_tokens: 16\n',
    );
    const rates = [0.5, 0.3, 0.7, 0.5, 0.6];
    fs.writeFileSync(
      dataset,
      Array.from({ length: 200 }, (_, i) =>
        JSON.stringify({ data_source: 'chat', instance_id: `c${i}`, turns: 1 + (i % 2), pass_rate: rates[i % rates.length] }),
      ).join('\n') + '\n',
    );
    for (const seed of [1, 2]) children.push(await cliProcess(['sim-llm', '--port', '0', '--seed', String(seed), '--config', simCfg]));
    sims = children.map((c) => c.url);
    for (const f of runsFiles) {
      fs.writeFileSync(f, '');
      children.push(await serveProcess(['--handler', COUNTING, '--workers-run', '8', '--log-level', 'warn'], { RAAS_RESUME_RUNS_FILE: f }));
    }
    servers = children.slice(2).map((c) => c.url);
  }, 120_000);

  afterAll(async () => {
    for (const c of children) await c.kill('SIGKILL');
    // Nothing this file started is left: no server, simulator, coordinator or sidecar.
    expect(await waitGone(() => descendantsOf(process.pid).filter((p) => p.cmd.includes(CLI)))).toEqual([]);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const config = (name: string, steps: number): string => {
    const f = path.join(dir, `${name}.yaml`);
    fs.writeFileSync(
      f,
      [
        `name: ${name}`,
        'seed: 7',
        `servers: [${servers.map((u) => `{url: "${u}"}`).join(', ')}]`,
        `backends: [${sims.map((u) => `"${u}"`).join(', ')}]`,
        `dataset: {path: "${dataset}"}`,
        'n: 4',
        'batch_size: 3',
        `steps: ${steps}`,
        `output_dir: ${path.join(dir, 'runs')}`,
        // The fleet's health checks (2 s timeout, twice) move a server's groups elsewhere, which re-runs
        // them by design; on a loaded 2-core machine a live server can miss them, so they are rare here.
        'health_interval_ms: 600000',
        '',
      ].join('\n'),
    );
    return f;
  };

  /** Executions per job id of a run, over both servers. */
  const executions = (name: string): Map<string, number> => {
    const runs = new Map<string, number>();
    for (const f of runsFiles)
      for (const line of fs.readFileSync(f, 'utf8').split('\n')) {
        const id = line.split('\t')[0]!;
        if (id.startsWith(`${name}-g`)) runs.set(id, (runs.get(id) ?? 0) + 1);
      }
    return runs;
  };
  const twice = (name: string): string[] => [...executions(name)].filter(([, n]) => n > 1).map(([id, n]) => `${id} x${n}`);
  /** Where and when each twice-run job ran, against the test's own events (for a failure message). */
  const events: string[] = [];
  const mark = (what: string): void => void events.push(`${what}@${Date.now()}`);
  const trace = (name: string): string => {
    const dup = new Set(twice(name).map((t) => t.split(' ')[0]));
    const lines = runsFiles.flatMap((f, i) =>
      fs
        .readFileSync(f, 'utf8')
        .split('\n')
        .filter((l) => dup.has(l.split('\t')[0]!))
        .map((l) => `server${i}:${l.replace('\t', '@')}`),
    );
    return `${lines.join(', ')}; events ${events.join(', ')}`;
  };
  const inFlightOnServers = async (): Promise<number> =>
    (await Promise.all(servers.map(async (u) => (await request(`${u}/status`)).body.pending_jobs as number))).reduce((a, b) => a + b, 0);

  /** Runs `raas train <args>` as a child process; `onCheckpoint` sees each new checkpoint.json. */
  const train = (args: string[], runDir: string, onCheckpoint?: (ck: { steps_done: number }, child: ChildProcess) => void) => {
    const child = spawn(process.execPath, [CLI, 'train', ...args], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout!.on('data', (c: Buffer) => (out += c));
    child.stderr!.on('data', (c: Buffer) => (out += c));
    let last = '';
    const poll =
      onCheckpoint &&
      setInterval(() => {
        try {
          const text = fs.readFileSync(path.join(runDir, 'checkpoint.json'), 'utf8');
          if (text !== last) {
            last = text;
            onCheckpoint(JSON.parse(text), child);
          }
        } catch {
          /* not written yet */
        }
      }, 20);
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; out: string }>((resolve) =>
      child.once('exit', (code, signal) => {
        if (poll) clearInterval(poll);
        resolve({ code, signal, out });
      }),
    );
    const t = setTimeout(() => child.kill('SIGKILL'), 150_000);
    void exited.then(() => clearTimeout(t));
    return { child, exited };
  };

  /** The run's batches: contiguous steps 0..steps-1, no group in two batches. */
  const checkBatches = (runDir: string, steps: number): void => {
    const batches = fs
      .readFileSync(path.join(runDir, 'batches.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { step: number; groups: Array<{ group_id: string }> });
    expect(batches.map((b) => b.step)).toEqual(Array.from({ length: steps }, (_, i) => i));
    const groups = batches.flatMap((b) => b.groups.map((g) => g.group_id));
    expect(new Set(groups).size).toBe(groups.length);
    for (let k = 0; k < steps; k++)
      expect(JSON.parse(fs.readFileSync(path.join(runDir, 'batches', `step-${k}.json`), 'utf8')).step).toBe(k);
  };

  it('raas train SIGKILLed mid-step after the checkpoint of step 1: --resume re-attaches, finishes every step, 0 rollouts run twice', async () => {
    const name = 'rk';
    const runDir = path.join(dir, 'runs', name);
    // Killed mid-step, once groups admitted after the latest checkpoint (of step 1 or later) run on the
    // servers: the checkpoint does not know where they went, so a resume that did not look them up
    // would run them again.
    let afterCk: number[] = [];
    let killedAt = -1;
    const first = train([config(name, 8)], runDir);
    const watch = setInterval(() => {
      let ck: { steps_done: number; coordinator: { next_group_index: number } };
      try {
        ck = JSON.parse(fs.readFileSync(path.join(runDir, 'checkpoint.json'), 'utf8'));
      } catch {
        return;
      }
      if (ck.steps_done < 2 || ck.steps_done > 5) return;
      afterCk = [
        ...new Set(
          [...executions(name).keys()].map((id) => Number(/-g(\d+)-r/.exec(id)![1])).filter((g) => g >= ck.coordinator.next_group_index),
        ),
      ];
      if (afterCk.length >= 2) {
        clearInterval(watch);
        killedAt = ck.steps_done;
        first.child.kill('SIGKILL');
        mark(`killed at ck ${ck.steps_done} next ${ck.coordinator.next_group_index}`);
      }
    }, 10);
    const r1 = await first.exited;
    clearInterval(watch);
    expect(r1.signal, r1.out).toBe('SIGKILL');
    const inFlight = await inFlightOnServers();
    const before = executions(name).size;
    const ck = JSON.parse(fs.readFileSync(path.join(runDir, 'checkpoint.json'), 'utf8'));
    expect(ck.steps_done).toBe(killedAt);
    expect(twice(name), trace(name)).toEqual([]);

    mark('resume');
    const second = train(['--resume', runDir], runDir);
    const r2 = await second.exited;
    expect(r2.code, r2.out).toBe(0);
    expect(r2.out).toMatch(new RegExp(`resuming "rk" at step ${killedAt} of 8`));
    checkBatches(runDir, 8);
    const summary = JSON.parse(fs.readFileSync(path.join(runDir, 'summary.json'), 'utf8'));
    expect(summary).toMatchObject({ status: 'finished', steps_asked: 8, steps_done: 8, resumes: 1 });
    expect(summary.steps.map((s: { step: number }) => s.step)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    // The kill left rollouts running on the servers (the case a re-run would hit) and none ran twice.
    expect(inFlight).toBeGreaterThan(0);
    expect(twice(name), trace(name)).toEqual([]);
    observe({
      section: 'faults',
      name: 'raas train SIGKILLed mid-step, then raas train --resume (two CLI servers, two sim backends)',
      observed: `killed mid-step ${killedAt} with ${afterCk.length} groups admitted after the checkpoint running and ${inFlight} jobs in flight on the servers and ${before} rollouts executed; the resume finished steps ${killedAt}-7; ${executions(name).size} job ids executed, none twice`,
      figures: {
        in_flight_at_kill: inFlight,
        groups_after_checkpoint: afterCk.length,
        rollouts: executions(name).size,
        rerun_rollouts: twice(name).length,
      },
    });
  }, 240_000);

  it('SIGTERM: raas train checkpoints, leaves its jobs running, writes status "interrupted"; --resume finishes with 0 re-runs', async () => {
    const name = 'rt';
    const runDir = path.join(dir, 'runs', name);
    let sent = false;
    const first = train([config(name, 5)], runDir, (ck, child) => {
      if (ck.steps_done >= 1 && !sent) {
        sent = true;
        child.kill('SIGTERM');
      }
    });
    const r1 = await first.exited;
    expect(r1.code, r1.out).toBe(130);
    expect(r1.out).toMatch(/keep running on the rollout servers.*raas train --resume/);
    const summary1 = JSON.parse(fs.readFileSync(path.join(runDir, 'summary.json'), 'utf8'));
    expect(summary1).toMatchObject({ status: 'interrupted', steps_asked: 5 });
    expect(summary1.steps_done).toBeGreaterThanOrEqual(1);
    expect(summary1.steps_done).toBeLessThan(5);
    // Not cancelled: what was in flight is still running (or finished) on the servers.
    const inFlight = await inFlightOnServers();

    const r2 = await train(['--resume', runDir], runDir).exited;
    expect(r2.code, r2.out).toBe(0);
    checkBatches(runDir, 5);
    expect(JSON.parse(fs.readFileSync(path.join(runDir, 'summary.json'), 'utf8'))).toMatchObject({
      status: 'finished',
      steps_asked: 5,
      steps_done: 5,
      resumes: 1,
    });
    expect(twice(name), trace(name)).toEqual([]);
    observe({
      section: 'faults',
      name: 'raas train SIGTERM (interrupted, checkpoint, no cancel), then --resume',
      observed: `interrupted after ${summary1.steps_done} of 5 steps with ${inFlight} jobs left running on the servers; the resume finished; ${executions(name).size} job ids executed, none twice`,
      figures: { rollouts: executions(name).size, rerun_rollouts: twice(name).length },
    });
  }, 240_000);

  /** `raas sidecar` as a child process with a line client. */
  const sidecar = (cfg: string) => {
    const child = spawn(process.execPath, [CLI, 'sidecar', '--config', cfg, '--progress-interval-s', '0', '--log-level', 'warn'], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, RAAS_DEBUG: 'dapo' },
    });
    const answers = new Map<number, (a: any) => void>();
    let buf = '';
    let err = '';
    child.stderr!.on('data', (c: Buffer) => {
      err += c;
      for (const l of String(c).split('\n')) if (/resume:|asked for/.test(l)) events.push(`${child.pid}:${l}`);
    });
    child.stdout!.on('data', (c: Buffer) => {
      buf += c;
      let i: number;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = JSON.parse(buf.slice(0, i));
        buf = buf.slice(i + 1);
        if ('ok' in line) answers.get(line.id)?.(line);
      }
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
      child.once('exit', (code, signal) => r({ code, signal })),
    );
    let id = 0;
    const call = async (op: string, params: Record<string, unknown> = {}): Promise<any> => {
      const n = ++id;
      const answer = new Promise<any>((resolve, reject) => {
        answers.set(n, resolve);
        void exited.then(() => reject(new Error(`sidecar exited before answering ${op}; stderr: ${err.slice(-2000)}`)));
      });
      child.stdin!.write(JSON.stringify({ id: n, op, ...params }) + '\n');
      const a = await answer;
      if (!a.ok) throw new Error(`${op}: ${a.error.code}: ${a.error.message}`);
      return a.result;
    };
    return { child, call, exited };
  };

  it('raas sidecar SIGKILLed after a checkpoint op: a new sidecar resumes the state, 0 rollouts run twice; shutdown after a checkpoint keeps the jobs', async () => {
    const name = 'rs';
    const cfg = config(name, 10);
    const a = sidecar(cfg);
    const b0 = await a.call('next_batch', { timeout_s: 120 });
    await a.call('update_weights');
    const state = (await a.call('checkpoint')).state;
    expect(state.step).toBe(1);
    // The trainer goes on past its checkpoint (step 1 is handed over, more groups admitted), then dies.
    const lost = await a.call('next_batch', { timeout_s: 120 });
    expect(lost.step).toBe(1);
    a.child.kill('SIGKILL');
    await a.exited;
    mark('a killed');
    const inFlight = await inFlightOnServers();

    const b = sidecar(cfg);
    mark('b resume');
    const resumed = await b.call('resume', { state });
    expect(resumed.status.step).toBe(1);
    const b1 = await b.call('next_batch', { timeout_s: 120 });
    await b.call('update_weights');
    const state2 = (await b.call('checkpoint')).state;
    const b2 = await b.call('next_batch', { timeout_s: 120 });
    expect([b0.step, b1.step, b2.step]).toEqual([0, 1, 2]);
    // A graceful shutdown after a checkpoint keeps the jobs in flight for the next resume.
    mark('b shutdown');
    expect(await b.call('shutdown')).toEqual({ closed: true, jobs: 'kept' });
    expect(await b.exited).toEqual({ code: 0, signal: null });

    const c = sidecar(cfg);
    mark('c resume');
    await c.call('resume', { state: state2 });
    const c2 = await c.call('next_batch', { timeout_s: 120 });
    expect(c2.step).toBe(2);
    const groups = [b0, b1, c2].flatMap((x) => x.groups.map((g: { group_id: string }) => g.group_id));
    expect(new Set(groups).size).toBe(groups.length);
    expect(await c.call('shutdown', { cancel: true })).toEqual({ closed: true, jobs: 'cancelled' });
    expect(await c.exited).toEqual({ code: 0, signal: null });
    expect(inFlight).toBeGreaterThan(0);
    expect(twice(name), trace(name)).toEqual([]);
    // The explicit cancel reached the servers: nothing of this run is left running.
    await until(async () => (await inFlightOnServers()) === 0, 'cancelled jobs ended', 30_000, 100);
    observe({
      section: 'faults',
      name: 'raas sidecar SIGKILLed after a checkpoint op, a new sidecar resumes (and a graceful shutdown keeps the jobs)',
      observed: `${inFlight} jobs in flight on the servers at the kill; two resumes; ${executions(name).size} job ids executed, none twice`,
      figures: { in_flight_at_kill: inFlight, rollouts: executions(name).size, rerun_rollouts: twice(name).length },
    });
  }, 240_000);
});
