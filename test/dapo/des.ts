// A discrete-event simulation of a rollout fleet for DapoCore: virtual time, seeded job durations
// (lognormal), seeded rewards per prompt pass rate, cancels confirmed after a delay with partial
// tokens. It drives the real DapoCore as the Coordinator does, without HTTP.
import { DapoCore } from '../../src/dapo/core.js';
import { PromptDataset, type Prompt } from '../../src/dapo/dataset.js';
import { parseTrainConfig } from '../../src/dapo/config.js';
import type { Batch } from '../../src/protocol/batch.js';
import type { Result } from '../../src/protocol/process.js';
import type { TrainConfigInput } from '../../src/protocol/config-train.js';
import { rng } from '../../src/util/hash.js';

export interface DesOptions {
  seed: number;
  config: Partial<TrainConfigInput>;
  capacity: number;
  steps: number;
  prompts?: number;
  /** Virtual ms the trainer spends per step. */
  trainMs?: number;
  /** Weight updates after each step (the property test varies it). */
  updatesPerStep?: (step: number) => number;
  /** Lognormal sigma of job durations. */
  sigma?: number;
  /** The live fleet's capacity at virtual time t (a server dying or coming back); default `capacity` throughout. */
  capacityAt?: (t: number) => number;
  /** Called right after each handover, before its cancels are sent. */
  afterHandover?: (core: DapoCore, batch: Batch, cancels: string[]) => void;
  /** Pass rate of prompt `i` for a group submitted under policy `version` (default: 0, 1, 0.5, 0.3, 0.7 by i mod 5). */
  passRate?: (i: number, version: number) => number;
}

export interface DesRun {
  batches: Batch[];
  core: DapoCore;
  maxAdmitted: number;
  /** Most groups held at once: buffered, running and cancelling (the admission bound counts all three). */
  maxHeld: number;
  maxRunningJobs: number;
  violations: string[];
  cancelledIds: Set<string>;
}

interface Ev {
  t: number;
  seq: number;
  run: () => void;
}

export function makeResult(jobId: string, reward: number, tokens: number, critical: Result['critical_error'] = null): Result {
  return {
    instance_id: null,
    trajectory_id: null,
    git_patch: null,
    success: reward > 0,
    finish: true,
    messages: [],
    tools: [],
    end_properly: true,
    resolved: reward > 0,
    critical_error: critical,
    filter: false,
    error: null,
    job_id: jobId,
    data_source: 'chat',
    reward,
    finish_reason: critical === 'cancelled' ? 'cancelled' : 'finish',
    backend: 'sim',
    policy_version: 0,
    weight_versions: ['0'],
    num_turns: 1,
    timing: {
      init_time: 0,
      run_time: 0,
      eval_time: 0,
      others_time: 0,
      counted_elapsed: 0,
      timeout_triggered: false,
      queued_s: 0,
      init_s: 0,
      run_s: 0,
      eval_s: 0,
      counted_s: 0,
    },
    tokens: {
      prompt_ids: [1, 2],
      response_ids: new Array(tokens).fill(7),
      response_mask: new Array(tokens).fill(1),
      logprobs: new Array(tokens).fill(-0.5),
    },
  };
}

export function runDes(o: DesOptions): DesRun {
  const cfg = parseTrainConfig({ name: 't', dataset: { path: 'x.jsonl' }, ...o.config });
  const rand = rng(o.seed);
  const nPrompts = o.prompts ?? 200;
  const rows: Prompt[] = Array.from({ length: nPrompts }, (_, i) => ({
    data_source: 'chat',
    instance_id: i,
    pass_rate: [0, 1, 0.5, 0.3, 0.7][i % 5],
  }));
  let now = 0;
  const clock = { now: () => now, setTimeout: () => 0, clearTimeout: () => {} };
  const core = new DapoCore(cfg, new PromptDataset(rows, { shuffle: true }, o.seed), clock, o.capacity);
  const queue: Ev[] = [];
  let seq = 0;
  const at = (t: number, run: () => void): void => {
    queue.push({ t, seq: seq++, run });
  };
  const jobs = new Map<string, { end: number; reward: number; tokens: number; started: number; done: boolean }>();
  const run: DesRun = { batches: [], core, maxAdmitted: 0, maxHeld: 0, maxRunningJobs: 0, violations: [], cancelledIds: new Set() };
  const sigma = o.sigma ?? 1;
  const normal = (): number => Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());

  const finish = (id: string, r: Result): void => {
    core.onResult(id, r);
  };
  const submit = (): void => {
    if (o.capacityAt) core.setCapacity(o.capacityAt(now));
    for (const g of core.admit()) {
      const rate = o.passRate ? o.passRate(Number(g.prompt.instance_id), g.submittedVersion) : Number(g.prompt.pass_rate);
      for (const req of g.requests) {
        const dur = 100 * Math.exp(sigma * normal());
        const tokens = Math.max(1, Math.round(dur));
        const reward = rand() < rate ? 1 : 0;
        const id = req.job_id!;
        const job = { end: now + dur, reward, tokens, started: now, done: false };
        jobs.set(id, job);
        at(job.end, () => {
          if (job.done) return;
          job.done = true;
          finish(id, makeResult(id, reward, tokens));
        });
      }
    }
    const admitted = core.bufferedGroups.length + core.runningGroups;
    run.maxAdmitted = Math.max(run.maxAdmitted, admitted);
    run.maxHeld = Math.max(run.maxHeld, admitted + core.cancellingGroups);
    run.maxRunningJobs = Math.max(run.maxRunningJobs, core.runningJobs);
  };
  const cancel = (ids: string[]): void => {
    for (const id of ids) {
      run.cancelledIds.add(id);
      const job = jobs.get(id)!;
      // The confirmation arrives a little later with the tokens generated so far.
      at(now + 1 + rand() * 5, () => {
        if (job.done) return;
        job.done = true;
        const partial = Math.min(job.tokens, Math.max(0, Math.round(now - job.started)));
        finish(id, makeResult(id, 0, partial, 'cancelled'));
      });
    }
  };

  let waiting = true;
  let step = 0;
  const tryHandover = (): void => {
    core.demand = waiting;
    submit();
    if (waiting && core.ready()) {
      const { batch, cancels } = core.handover();
      run.batches.push(batch);
      o.afterHandover?.(core, batch, cancels);
      cancel(cancels);
      waiting = false;
      step++;
      if (step < o.steps) {
        at(now + (o.trainMs ?? 50), () => {
          const k = o.updatesPerStep ? o.updatesPerStep(step) : 1;
          for (let i = 0; i < k; i++) cancel(core.setVersion(core.version + 1));
          waiting = true;
        });
      }
      core.demand = waiting;
      submit();
    }
  };
  tryHandover();
  let guard = 0;
  while (run.batches.length < o.steps && queue.length > 0 && guard++ < 1e6) {
    queue.sort((a, b) => a.t - b.t || a.seq - b.seq);
    const ev = queue.shift()!;
    now = Math.max(now, ev.t);
    ev.run();
    tryHandover();
    // One group may run alone when n exceeds the capacity; otherwise the cap holds.
    if (core.runningJobs > Math.max(o.capacity, cfg.n, cfg.selection.adaptive_n?.max ?? 0) && cfg.mode === 'async' && !o.capacityAt)
      run.violations.push(`running jobs ${core.runningJobs} > capacity ${o.capacity}`);
    // The core keeps its group counts by state as states change; they must equal a scan.
    const scan = { running: 0, buffered: 0, cancelling: 0 };
    for (const g of core.groups.values()) if (g.state in scan) scan[g.state as keyof typeof scan]++;
    const kept = { running: core.runningGroups, buffered: core.bufferedCount, cancelling: core.cancellingGroups };
    if (JSON.stringify(scan) !== JSON.stringify(kept))
      run.violations.push(`counts ${JSON.stringify(kept)} differ from a scan ${JSON.stringify(scan)}`);
  }
  return run;
}
