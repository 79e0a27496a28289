/**
 * The coordinator's own policy under the oracle's conditions: the measured groups replayed through
 * the real DapoCore (src/dapo/core.ts) in virtual time, with zero overhead (no HTTP, instant cancels)
 * and the server's workers taking jobs first come, first served. Between the oracle and a measured
 * run it splits the gap in two: oracle → replay is what the admission policy costs (whole groups
 * against a max_inflight_jobs cap, the staleness bound as the core applies it); replay → measured is
 * what the system costs (HTTP, event loop, weight updates).
 */
import { Heap } from 'heap-js';
import { parseTrainConfig } from '../src/dapo/config.js';
import { DapoCore } from '../src/dapo/core.js';
import { PromptDataset, type Prompt } from '../src/dapo/dataset.js';
import type { TrainConfigInput } from '../src/protocol/config-train.js';
import type { Result } from '../src/protocol/process.js';

/** A finished group of the run: each rollout's duration (s) and reward. */
export interface ReplayGroup {
  durations: readonly number[];
  rewards: readonly number[];
}

export interface ReplayParams {
  config: Partial<TrainConfigInput>;
  workers: number;
  /** The coordinator's max_inflight_jobs. */
  capacity: number;
  train_s: number;
  steps: number;
  /**
   * System delays to inject (s), all 0 by default: admission → the server's queue, a job's end →
   * its result in the core, a cancel → its confirmation, and the weight update after the trainer's
   * step (admission holds meanwhile). With the delays a live run measured, the replay says how much
   * of the gap to the oracle they explain.
   */
  delays?: { submit_s?: number; result_s?: number; cancel_s?: number; update_s?: number };
}

export interface ReplayRun {
  wall_s: number;
  informative_groups_per_s: number;
  /** Busy worker-seconds ÷ (workers × wall). */
  utilization: number;
  /** The core's wasted ÷ generated tokens, a token standing for 10 ms of a rollout. */
  waste_fraction: number;
  /** Handover times (s). */
  handover_s: number[];
}

/** A token stands for this many seconds of a rollout (waste is counted in tokens by the core). */
const TOKEN_S = 0.01;

function result(jobId: string, reward: number, cancelled: boolean, seconds: number): Result {
  const t = Math.max(0, Math.round(seconds / TOKEN_S));
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
    critical_error: cancelled ? 'cancelled' : null,
    filter: false,
    error: null,
    job_id: jobId,
    data_source: 'chat',
    reward,
    finish_reason: cancelled ? 'cancelled' : 'finish',
    backend: 'replay',
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
    tokens: { prompt_ids: [], response_ids: [], response_mask: new Array(t).fill(1), logprobs: [] },
  };
}

interface Ev {
  t: number;
  seq: number;
  run: () => void;
}

export function replayCoordinator(groups: readonly ReplayGroup[], p: ReplayParams): ReplayRun {
  if (groups.length === 0) throw new Error('replay: no finished group to replay');
  const cfg = parseTrainConfig({ name: 'replay', dataset: { path: 'replay.jsonl' }, steps: p.steps, ...p.config }, 'replay');
  const rows: Prompt[] = groups.map((_, i) => ({ data_source: 'chat', instance_id: i }));
  let now = 0;
  const clock = { now: () => now * 1000, setTimeout: () => 0, clearTimeout: () => {} };
  const core = new DapoCore(cfg, new PromptDataset(rows, { shuffle: false }, 0), clock, p.capacity);
  const events = new Heap<Ev>((a, b) => a.t - b.t || a.seq - b.seq);
  let seq = 0;
  const at = (t: number, run: () => void): void => void events.push({ t, seq: seq++, run });
  // The server: `workers` slots, jobs first come, first served.
  const queue: Array<{ id: string; d: number; reward: number }> = [];
  let qHead = 0;
  let free = p.workers;
  let busy = 0;
  const jobs = new Map<string, { started?: number; done: boolean }>();
  const d = { submit_s: 0, result_s: 0, cancel_s: 0, update_s: 0, ...p.delays };
  let updating = false;
  const startJobs = (): void => {
    while (free > 0 && qHead < queue.length) {
      const q = queue[qHead++]!;
      const j = jobs.get(q.id)!;
      if (j.done) continue;
      free--;
      j.started = now;
      at(now + q.d, () => {
        if (j.done) return;
        j.done = true;
        free++;
        busy += now - j.started!;
        const r = result(q.id, q.reward, false, q.d);
        if (d.result_s > 0) at(now + d.result_s, () => core.onResult(q.id, r));
        else core.onResult(q.id, r);
      });
    }
  };
  const cancelNow = (ids: string[]): void => {
    for (const id of ids) {
      const j = jobs.get(id);
      if (!j || j.done) continue;
      j.done = true;
      if (j.started !== undefined) {
        free++;
        busy += now - j.started;
      }
      core.onResult(id, result(id, 0, true, j.started === undefined ? 0 : now - j.started));
    }
  };
  const cancel = (ids: string[]): void => {
    if (d.cancel_s > 0 && ids.length > 0) at(now + d.cancel_s, () => cancelNow(ids));
    else cancelNow(ids);
  };
  let waiting = true;
  let handed = 0;
  const handovers: number[] = [];
  let done = false;
  const admit = (): void => {
    if (updating) return;
    for (const g of core.admit()) {
      const src = groups[Number(g.prompt.instance_id)]!;
      const enqueue = (): void => {
        g.requests.forEach((r, k) => {
          const j = jobs.get(r.job_id!)!;
          if (!j.done) queue.push({ id: r.job_id!, d: Math.max(0, src.durations[k] ?? 0), reward: src.rewards[k] ?? 0 });
        });
        startJobs();
      };
      for (const r of g.requests) jobs.set(r.job_id!, { done: false });
      if (d.submit_s > 0) at(now + d.submit_s, enqueue);
      else enqueue();
    }
  };
  // As the Coordinator's pump: admission, then a handover to the waiting trainer, then admission again.
  const pump = (): void => {
    core.demand = waiting;
    admit();
    if (waiting && core.ready()) {
      const { cancels } = core.handover();
      handed++;
      handovers.push(now);
      waiting = false;
      core.demand = false;
      cancel(cancels);
      at(now + p.train_s, () => {
        cancel(core.setVersion(core.version + 1));
        const end = (): void => {
          updating = false;
          if (handed < p.steps) waiting = true;
          else done = true;
        };
        if (d.update_s > 0) {
          updating = true;
          at(now + d.update_s, end);
        } else end();
      });
      admit();
    }
    startJobs();
  };
  pump();
  let guard = 0;
  while (!done) {
    const ev = events.pop();
    if (!ev) throw new Error('replay: the coordinator stalled (no event left before the last step)');
    if (++guard > 5e6) throw new Error('replay: too many events');
    now = ev.t;
    ev.run();
    pump();
  }
  for (const j of jobs.values()) if (!j.done && j.started !== undefined) busy += now - j.started;
  return {
    wall_s: now,
    informative_groups_per_s: (p.steps * cfg.batch_size) / now,
    utilization: now > 0 ? busy / (p.workers * now) : 1,
    waste_fraction: core.totals.tokens_wasted / Math.max(1, core.totals.tokens_generated),
    handover_s: handovers,
  };
}
