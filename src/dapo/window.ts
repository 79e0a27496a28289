import type { BatchStats } from '../protocol/batch.js';

/**
 * Counters of one step window: everything that happened between the previous handover (or the
 * start) and this one. Group counts unless the name says jobs or tokens.
 */
export class StepWindow {
  startedAt: number;
  submitted = 0;
  jobsSubmitted = 0;
  completed = 0;
  accepted = 0;
  filtered = 0;
  cancelled = 0;
  jobsCancelled = 0;
  errors = 0;
  droppedStale = 0;
  droppedError = 0;
  tokensGenerated = 0;
  tokensWasted = 0;
  tokensFiltered = 0;
  rewardSum = 0;
  rewardCount = 0;
  /** Prompts selection skipped (never submitted), by the way their recent groups were uniform. */
  skipped = 0;
  skippedEasy = 0;
  skippedHard = 0;
  /** Prompts submitted only because the exploration floor drew them or max_skips forced them. */
  explored = 0;
  /** Seconds each stage took, summed over the rollouts that ended in the window and reported timing. */
  readonly stageSeconds = { queued: 0, init: 0, run: 0, eval: 0 };
  timedRollouts = 0;
  /** Uniform (filtered) groups by the value their rewards all had. */
  readonly uniformAt = new Map<number, number>();
  /** Σ group size over the groups submitted in the window (the mean n under adaptive n). */
  nSum = 0;
  /** Fixed-n batches: rollouts of larger groups left out of the batch, and their tokens. */
  rolloutsTrimmed = 0;
  tokensTrimmed = 0;
  /** ∫ min(running jobs, capacity) dt, in job·ms. */
  busyIntegral = 0;
  /** ∫ capacity dt, in job·ms (the cap follows the live fleet, so it may change inside a window). */
  capacityIntegral = 0;
  private lastAt: number;

  constructor(now: number) {
    this.startedAt = now;
    this.lastAt = now;
  }

  /** Adds one ended rollout's stage times (a result without timing, from another server, adds nothing). */
  addTiming(t: { queued_s?: number; init_s?: number; run_s?: number; eval_s?: number } | undefined): void {
    if (!t || typeof t.run_s !== 'number') return;
    this.timedRollouts++;
    this.stageSeconds.queued += t.queued_s ?? 0;
    this.stageSeconds.init += t.init_s ?? 0;
    this.stageSeconds.run += t.run_s ?? 0;
    this.stageSeconds.eval += t.eval_s ?? 0;
  }

  /** Accumulates worker occupancy up to `now` with `running` jobs in flight since the last call. */
  integrate(now: number, running: number, capacity: number): void {
    const dt = now - this.lastAt;
    if (dt > 0) {
      this.busyIntegral += Math.min(running, capacity) * dt;
      this.capacityIntegral += capacity * dt;
    }
    this.lastAt = now;
  }

  /** The window's stats at handover (`extra` are the batch-dependent fields). */
  finish(
    now: number,
    capacity: number,
    extra: {
      carried_over: number;
      tokens_used: number;
      staleness: number[];
      batch_rewards: number[];
      running_at_handover: number;
      buffered_after_handover: number;
      batch_size: number;
      selection?: Record<string, number>;
    },
  ): BatchStats {
    const wallMs = Math.max(now - this.startedAt, 1e-9);
    const hist: Record<string, number> = {};
    for (const s of extra.staleness) hist[String(s)] = (hist[String(s)] ?? 0) + 1;
    const mean = (xs: number[]): number => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);
    return {
      submitted: this.submitted,
      completed: this.completed,
      accepted: this.accepted,
      filtered: this.filtered,
      cancelled: this.cancelled,
      carried_over: extra.carried_over,
      errors: this.errors,
      dropped_stale: this.droppedStale,
      staleness_histogram: hist,
      wall_s: wallMs / 1000,
      worker_utilization: this.capacityIntegral > 0 ? this.busyIntegral / this.capacityIntegral : 0,
      tokens_generated: this.tokensGenerated,
      tokens_used: extra.tokens_used,
      // additive fields (docs/batch-format.md)
      jobs_submitted: this.jobsSubmitted,
      jobs_cancelled: this.jobsCancelled,
      dropped_error: this.droppedError,
      tokens_wasted: this.tokensWasted,
      tokens_filtered: this.tokensFiltered,
      mean_reward: this.rewardCount ? this.rewardSum / this.rewardCount : 0,
      batch_mean_reward: mean(extra.batch_rewards),
      staleness_mean: mean(extra.staleness),
      staleness_max: extra.staleness.length ? Math.max(...extra.staleness) : 0,
      informative_groups_per_s: extra.batch_size / (wallMs / 1000),
      running_at_handover: extra.running_at_handover,
      buffered_after_handover: extra.buffered_after_handover,
      max_inflight_jobs: capacity,
      skipped: this.skipped,
      skipped_easy: this.skippedEasy,
      skipped_hard: this.skippedHard,
      explored: this.explored,
      mean_group_size: this.submitted ? this.nSum / this.submitted : 0,
      rollouts_trimmed: this.rolloutsTrimmed,
      tokens_trimmed: this.tokensTrimmed,
      // mean seconds per stage of the rollouts that ended in the window (queued: waiting in the server's queues)
      queued_s_mean: this.timedRollouts ? this.stageSeconds.queued / this.timedRollouts : 0,
      init_s_mean: this.timedRollouts ? this.stageSeconds.init / this.timedRollouts : 0,
      run_s_mean: this.timedRollouts ? this.stageSeconds.run / this.timedRollouts : 0,
      eval_s_mean: this.timedRollouts ? this.stageSeconds.eval / this.timedRollouts : 0,
      ...extra.selection,
    };
  }
}
