/**
 * What bench:dapo records besides the batches: every rollout's terminal result (its server-side
 * duration, tokens, reward), the rollout server's busy RUN workers over time (sampled from GET
 * /status), and the processes' CPU time.
 */
import { readFileSync } from 'node:fs';
import type { Coordinator } from '../src/dapo/index.js';
import type { DapoCore } from '../src/dapo/core.js';
import { isInformative } from '../src/dapo/rewards.js';
import { resultTokens } from '../src/dapo/group.js';
import type { Result } from '../src/protocol/process.js';
import type { OracleGroup } from './dapo-oracle.js';
import type { ReplayGroup } from './dapo-replay.js';

export interface RolloutRecord {
  group: number;
  k: number;
  /** Seconds the job held a server worker: INIT + RUN + EVAL (queueing excluded). */
  duration_s: number;
  tokens: number;
  turns: number;
  reward: number;
  /** Ended normally (not cancelled, no error). */
  ok: boolean;
  /** The server's stages (s). */
  queued_s: number;
  run_s: number;
  /** From the driver's admission to the result in its hands (s), when the submission was stamped. */
  life_s?: number;
}

/** Where a job's life on the driver's books goes, summed over the rollouts that ended normally (s). */
export interface LifeBreakdown {
  jobs: number;
  life_s: number;
  queued_s: number;
  run_s: number;
  /** INIT + EVAL. */
  init_eval_s: number;
  /** The rest: HTTP both ways, result (de)serialization, event-loop delays. */
  transit_s: number;
}

/** Every rollout's first terminal result, by job id (`<run>-g<index>-r<k>`). */
export class Recorder {
  readonly rollouts = new Map<string, RolloutRecord>();
  private readonly submittedAt = new Map<string, number>();

  /** Stamps a job's admission (performance.now()). */
  submitted(jobId: string): void {
    if (!this.submittedAt.has(jobId)) this.submittedAt.set(jobId, performance.now());
  }

  add(jobId: string, r: Result): void {
    if (this.rollouts.has(jobId)) return;
    const at = this.submittedAt.get(jobId);
    const m = /-g(\d+)-r(\d+)$/.exec(jobId);
    if (!m) return;
    const t = r.timing;
    this.rollouts.set(jobId, {
      group: Number(m[1]),
      k: Number(m[2]),
      duration_s: (t?.init_s ?? 0) + (t?.run_s ?? 0) + (t?.eval_s ?? 0),
      tokens: resultTokens(r),
      turns: r.num_turns ?? 0,
      reward: r.reward ?? 0,
      ok: r.critical_error === null,
      queued_s: t?.queued_s ?? 0,
      run_s: t?.run_s ?? 0,
      ...(at !== undefined ? { life_s: (performance.now() - at) / 1000 } : {}),
    });
  }

  /** Sums of the stamped rollouts that ended normally. */
  life(): LifeBreakdown {
    const out: LifeBreakdown = { jobs: 0, life_s: 0, queued_s: 0, run_s: 0, init_eval_s: 0, transit_s: 0 };
    for (const r of this.rollouts.values()) {
      if (!r.ok || r.life_s === undefined) continue;
      out.jobs++;
      out.life_s += r.life_s;
      out.queued_s += r.queued_s;
      out.run_s += r.run_s;
      out.init_eval_s += r.duration_s - r.run_s;
    }
    out.transit_s = out.life_s - out.queued_s - out.run_s - out.init_eval_s;
    return out;
  }

  /**
   * The oracle's input: every group the run admitted, in submission order, once each of its n
   * rollouts has a terminal result (the bench lets the groups in flight at the end finish, so none
   * is left out). A group the coordinator cancelled (too stale) enters with the time its rollouts
   * ran, a lower bound of their durations, and as uninformative. Keeping only the groups that
   * ended normally would leave out the long ones the run had to cancel or was still running, and
   * hand the oracle a workload shorter than the run's.
   */
  oracleGroups(n: number): OracleGroup[] {
    return this.ended(n).map((l) => ({
      durations: l.map((r) => r.duration_s),
      informative: l.every((r) => r.ok) && isInformative(l.map((r) => r.reward)),
    }));
  }

  /** The same groups with their rewards (a cancelled group's all 0): the policy replay's input. */
  replayGroups(n: number): ReplayGroup[] {
    return this.ended(n).map((l) => ({
      durations: l.map((r) => r.duration_s),
      rewards: l.every((r) => r.ok) ? l.map((r) => r.reward) : l.map(() => 0),
    }));
  }

  /** The groups with n terminal results, in submission order. */
  private ended(n: number): RolloutRecord[][] {
    const byGroup = new Map<number, RolloutRecord[]>();
    for (const r of this.rollouts.values()) {
      const l = byGroup.get(r.group) ?? [];
      l.push(r);
      byGroup.set(r.group, l);
    }
    return [...byGroup.entries()]
      .filter(([, l]) => l.length === n)
      .sort((a, b) => a[0] - b[0])
      .map(([, l]) => l.sort((a, b) => a.k - b.k));
  }

  /** Tokens of the rollouts that ended normally. */
  tokens(): number[] {
    return [...this.rollouts.values()].filter((r) => r.ok).map((r) => r.tokens);
  }
}

/** Feeds a coordinator's terminal results to `rec` (the bench reaches into its core; nothing else changes). */
export function recordCoordinator(c: Coordinator, rec: Recorder): void {
  const core = (c as unknown as { core?: DapoCore }).core;
  if (!core) throw new Error('recordCoordinator: call start() first');
  const orig = core.onResult.bind(core);
  core.onResult = (jobId: string, r: Result): void => {
    rec.add(jobId, r);
    orig(jobId, r);
  };
  const admit = core.admit.bind(core);
  core.admit = () => {
    const gs = admit();
    for (const g of gs) for (const q of g.requests) rec.submitted(q.job_id!);
    return gs;
  };
}

/** Samples GET /status every `everyMs`: the time-average of busy RUN workers ÷ the pool size. */
export class RunUtilSampler {
  private busyIntegral = 0;
  private span = 0;
  private last: { t: number; busy: number } | undefined;
  private size = 0;
  private timer: NodeJS.Timeout | undefined;
  private inFlight = false;
  samples = 0;

  constructor(
    private readonly url: string,
    private readonly everyMs = 50,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.sample(), this.everyMs);
    void this.sample();
  }

  private async sample(): Promise<void> {
    if (this.inFlight) return;
    this.inFlight = true;
    try {
      const res = await fetch(`${this.url}/status`);
      const s = (await res.json()) as { workers: { run: { size: number; busy: number } } };
      const t = performance.now();
      if (this.last) {
        // Sample-and-hold between two answers.
        this.busyIntegral += this.last.busy * (t - this.last.t);
        this.span += t - this.last.t;
      }
      this.last = { t, busy: s.workers.run.busy };
      this.size = s.workers.run.size;
      this.samples++;
    } catch {
      // a failed sample is skipped
    } finally {
      this.inFlight = false;
    }
  }

  /** Stops sampling; the time-averaged fraction of busy RUN workers. */
  stop(): number {
    clearInterval(this.timer);
    return this.span > 0 && this.size > 0 ? this.busyIntegral / this.span / this.size : 0;
  }
}

/** utime + stime of a process from /proc (Linux), in seconds; 0 where /proc is missing. */
export function processCpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(stat[11]) + Number(stat[12])) / 100;
  } catch {
    return 0;
  }
}

/** Nearest-rank percentile. */
export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}
