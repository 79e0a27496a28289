/**
 * The coordinator's pure logic alone (DapoCore, no HTTP) at a fleet's worth of jobs in flight:
 * virtual time, lognormal durations, every result followed by what Coordinator.pump() does
 * (capacity, admission, handover to a waiting trainer, a weight update after the trainer's step).
 * Its CPU per job should not depend on the number of jobs in flight; `bench:fleet-scale` prints it
 * next to the HTTP runs, because on a loaded machine it is the figure that stays exact.
 */
import { Heap } from 'heap-js';
import { parseTrainConfig } from '../src/dapo/config.js';
import { DapoCore } from '../src/dapo/core.js';
import { PromptDataset, type Prompt } from '../src/dapo/dataset.js';
import type { Result } from '../src/protocol/process.js';
import { rng } from '../src/util/hash.js';

/** What one core-only run measured. */
export interface CoreRun {
  in_flight: number;
  jobs: number;
  us_per_job: number;
  handovers: number;
  cancels: number;
}

function result(jobId: string, reward: number, tokens: number, cancelled: boolean): Result {
  const ids = new Array<0 | 1>(tokens).fill(1);
  return {
    instance_id: null,
    trajectory_id: null,
    git_patch: null,
    success: !cancelled,
    finish: true,
    messages: [],
    tools: [],
    end_properly: !cancelled,
    resolved: reward > 0,
    critical_error: cancelled ? 'cancelled' : null,
    filter: false,
    error: null,
    job_id: jobId,
    data_source: 'chat',
    reward,
    finish_reason: cancelled ? 'cancelled' : 'finish',
    backend: 'core',
    policy_version: 0,
    weight_versions: [],
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
    tokens: { prompt_ids: [], response_ids: ids, response_mask: ids, logprobs: [] },
  };
}

/** Runs the core with `capacity` jobs in flight until `turnovers × capacity` jobs have ended. */
export function runCore(capacity: number, n: number, turnovers: number, seed = 1): CoreRun {
  const rand = rng(seed);
  const rows: Prompt[] = Array.from({ length: 4000 }, (_, i) => {
    const u = rand();
    return { data_source: 'chat', instance_id: i, pass_rate: u < 0.125 ? 0 : u < 0.25 ? 1 : 0.5 };
  });
  const B = Math.max(1, Math.floor(capacity / n));
  const cfg = parseTrainConfig({ name: 'core', dataset: { path: 'core.jsonl' }, n, batch_size: B, steps: 1_000_000 }, 'core');
  let now = 0;
  const clock = { now: () => now, setTimeout: () => 0, clearTimeout: () => {} };
  const core = new DapoCore(cfg, new PromptDataset(rows, { shuffle: false }, 0), clock, capacity);
  interface Ev {
    t: number;
    seq: number;
    id: string;
    reward: number;
  }
  const events = new Heap<Ev>((a, b) => a.t - b.t || a.seq - b.seq);
  const live = new Set<string>();
  let seq = 0;
  // Mean rollout 1 virtual second whatever the capacity: only the count in flight changes.
  const draw = (): number => Math.exp(0.8 * Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand()) - 0.32) * 1000;
  const admit = (): void => {
    for (const g of core.admit()) {
      const pass = Number(g.prompt.pass_rate);
      for (const r of g.requests) {
        live.add(r.job_id!);
        events.push({ t: now + draw(), seq: seq++, id: r.job_id!, reward: rand() < pass ? 1 : 0 });
      }
    }
  };
  let cancels = 0;
  const cancel = (ids: string[]): void => {
    for (const id of ids) {
      if (!live.delete(id)) continue;
      cancels++;
      core.onResult(id, result(id, 0, 50, true));
    }
  };
  let waiting = true;
  let updateAt = Number.POSITIVE_INFINITY;
  let handovers = 0;
  const pump = (): void => {
    core.setCapacity(capacity);
    core.demand = waiting;
    admit();
    if (waiting && core.ready()) {
      const { cancels: ids } = core.handover();
      handovers++;
      cancel(ids);
      waiting = false;
      updateAt = now + 300;
      admit();
    }
  };
  pump();
  const target = turnovers * capacity;
  let jobs = 0;
  const cpu0 = process.cpuUsage();
  while (jobs < target) {
    const ev = events.peek();
    if (updateAt <= (ev?.t ?? Number.POSITIVE_INFINITY)) {
      now = updateAt;
      updateAt = Number.POSITIVE_INFINITY;
      cancel(core.setVersion(core.version + 1));
      waiting = true;
    } else if (ev) {
      events.pop();
      now = ev.t;
      if (!live.delete(ev.id)) continue;
      core.onResult(ev.id, result(ev.id, ev.reward, 200, false));
      jobs++;
    } else break;
    pump();
  }
  const cpu = process.cpuUsage(cpu0);
  return { in_flight: capacity, jobs, us_per_job: (cpu.user + cpu.system) / Math.max(1, jobs), handovers, cancels };
}
