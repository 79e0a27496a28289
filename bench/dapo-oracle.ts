/**
 * The oracle of `bench:dapo`: a discrete-event replay of the rollout durations a run measured, under
 * an ideal scheduler with the same worker count, batch size, staleness bound and trainer step time.
 *
 * The ideal scheduler:
 * - perfect admission, zero overhead: a rollout starts the instant a worker frees (one rollout at a
 *   time, no wait for n free workers, no HTTP, no cancel latency);
 * - prompts in the run's order, and it never reads a reward before the group has finished (it
 *   cannot skip the prompts whose groups turn out zero-variance: DAPO's dynamic sampling pays for them);
 * - it admits a group whenever a worker would otherwise idle and the group could still enter a batch
 *   within the staleness bound (version + max_staleness ≥ the index of the next batch);
 * - a batch is handed over as soon as the trainer waits for it and batch_size informative groups
 *   are finished, oldest version first (then prompt order); the trainer trains `train_s`, then the
 *   weight update is instantaneous (version + 1);
 * - at a handover, every group that could no longer meet the bound at the next one is dropped
 *   (running rollouts free their workers at once): what carry-over with the bound allows, no more.
 * It is a greedy, work-conserving schedule, not a proven optimum; no run of the coordinator under the
 * same durations can admit earlier, start rollouts sooner or hand over earlier than it does.
 * The list of groups is replayed cyclically if the ideal schedule needs more than the run finished.
 */
import { Heap } from 'heap-js';

/** One finished group of the run: its rollouts' durations (s) and whether its rewards differ. */
export interface OracleGroup {
  durations: readonly number[];
  informative: boolean;
}

export interface OracleParams {
  workers: number;
  batch_size: number;
  /** 0 for batch-by-batch (sync) training. */
  max_staleness: number;
  /** The trainer's step time (s): from a handover to the weight update. */
  train_s: number;
  steps: number;
}

export interface OracleRun {
  /** From the start to the last step's weight update (as the bench measures its wall time). */
  wall_s: number;
  informative_groups_per_s: number;
  /** Handover times (s). */
  handover_s: number[];
  /** Busy worker-seconds ÷ (workers × wall). */
  utilization: number;
  groups_admitted: number;
  /** Groups dropped at a handover because they could not meet the bound (their work is waste). */
  groups_dropped: number;
  /** Worker-seconds spent on dropped groups ÷ all busy worker-seconds. */
  waste_fraction: number;
}

interface G {
  version: number;
  informative: boolean;
  left: number;
  state: 'running' | 'buffered' | 'done' | 'dropped';
  seq: number;
  live: Set<Ro>;
  /** Worker-seconds of its finished rollouts. */
  doneBusy: number;
}
interface Ro {
  g: G;
  start: number;
  end: number;
  seq: number;
}

export function oracleSchedule(groups: readonly OracleGroup[], p: OracleParams): OracleRun {
  if (!groups.some((g) => g.informative))
    throw new Error('oracle: no informative group among the measured ones; nothing can be handed over');
  if (p.workers < 1 || p.batch_size < 1 || p.steps < 1) throw new Error('oracle: workers, batch_size and steps must be ≥ 1');
  const events = new Heap<Ro>((a, b) => a.end - b.end || a.seq - b.seq);
  const ready: Array<{ g: G; d: number }> = [];
  let readyHead = 0;
  const active = new Set<G>(); // running or buffered
  let now = 0;
  let version = 0;
  let handed = 0;
  let free = p.workers;
  let cursor = 0;
  let seq = 0;
  let busy = 0;
  let wasted = 0;
  let dropped = 0;
  let waiting = true; // the trainer waits for a batch
  let updateAt: number | undefined;
  const handovers: number[] = [];

  const usable = (): boolean => version + p.max_staleness >= handed;
  const fill = (): void => {
    while (free > 0) {
      while (readyHead < ready.length && ready[readyHead]!.g.state === 'dropped') readyHead++;
      if (readyHead < ready.length) {
        const { g, d } = ready[readyHead++]!;
        const ro: Ro = { g, start: now, end: now + d, seq: seq++ };
        g.live.add(ro);
        events.push(ro);
        free--;
        continue;
      }
      if (!usable()) return;
      const src = groups[cursor % groups.length]!;
      const g: G = {
        version,
        informative: src.informative,
        left: src.durations.length,
        state: 'running',
        seq: cursor++,
        live: new Set(),
        doneBusy: 0,
      };
      active.add(g);
      for (const d of src.durations) ready.push({ g, d: Math.max(0, d) });
      if (g.left === 0) finish(g);
    }
  };
  const finish = (g: G): void => {
    if (g.informative) g.state = 'buffered';
    else {
      g.state = 'done';
      active.delete(g);
    }
  };
  const drop = (g: G): void => {
    g.state = 'dropped';
    active.delete(g);
    dropped++;
    for (const ro of g.live) {
      busy += now - ro.start;
      wasted += now - ro.start;
      free++;
    }
    // Its finished rollouts are waste too.
    wasted += g.doneBusy;
    g.live.clear();
  };
  const tryHandover = (): void => {
    if (!waiting) return;
    const buffered = [...active].filter((g) => g.state === 'buffered');
    if (buffered.length < p.batch_size) return;
    buffered.sort((a, b) => a.version - b.version || a.seq - b.seq);
    for (const g of buffered.slice(0, p.batch_size)) {
      g.state = 'done';
      active.delete(g);
    }
    handed++;
    handovers.push(now);
    waiting = false;
    updateAt = now + p.train_s;
    // The next batch (index `handed`) is handed under version `handed`.
    for (const g of [...active]) if (g.version < handed - p.max_staleness) drop(g);
  };

  fill();
  while (handed < p.steps || updateAt !== undefined) {
    const next = events.peek();
    if (updateAt !== undefined && (!next || updateAt <= next.end)) {
      now = updateAt;
      updateAt = undefined;
      version++;
      if (handed >= p.steps) break;
      waiting = true;
    } else if (next) {
      events.pop();
      if (!next.g.live.delete(next)) continue; // its group was dropped
      now = next.end;
      busy += next.end - next.start;
      const g = next.g;
      g.doneBusy += next.end - next.start;
      free++;
      if (--g.left === 0) finish(g);
    } else {
      throw new Error('oracle: no event left before the last handover (internal error)');
    }
    tryHandover();
    fill();
    tryHandover();
  }
  const wall = now;
  return {
    wall_s: wall,
    informative_groups_per_s: (p.steps * p.batch_size) / wall,
    handover_s: handovers,
    utilization: wall > 0 ? busy / (p.workers * wall) : 1,
    groups_admitted: cursor,
    groups_dropped: dropped,
    waste_fraction: busy > 0 ? wasted / busy : 0,
  };
}
