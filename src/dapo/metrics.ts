import { Counter, Gauge, Registry } from 'prom-client';
import type { Batch } from '../protocol/batch.js';
import type { CoordinatorStatus } from './coordinator.js';
import { summarise, type StepSummary } from './run-writer.js';

/**
 * One line of `runs/<name>/metrics.jsonl`: every figure of the step line (the summary row) plus the
 * rest of the batch's window stats, the time since the run started and the wall-clock time.
 */
export interface StepRecord extends StepSummary {
  /** ISO time the batch was handed over. */
  time: string;
  /** Seconds since the run started. */
  elapsed_s: number;
  /** Groups whose n rollouts all ended in this step's window (accepted + filtered + dropped on error). */
  finished: number;
  /** filtered / finished (0 when nothing finished). */
  filtered_share: number;
  /** tokens_wasted / tokens_generated of the window. */
  waste_fraction: number;
  submitted: number;
  completed: number;
  errors: number;
  dropped_stale: number;
  dropped_error: number;
  jobs_submitted: number;
  jobs_cancelled: number;
  tokens_used: number;
  tokens_filtered: number;
  running_at_handover: number;
  buffered_after_handover: number;
  max_inflight_jobs: number;
  staleness_histogram: Record<string, number>;
  /** Prompt turns selection skipped in the window (by the way their recent groups were uniform), and prompts it submitted on the exploration floor. */
  skipped: number;
  skipped_easy: number;
  skipped_hard: number;
  explored: number;
  /** Mean group size submitted in the window (n, unless adaptive n). */
  mean_group_size: number;
  /** Fixed-n batches of adaptive n: rollouts left out of the batch, and their tokens (counted as waste). */
  rollouts_trimmed: number;
  tokens_trimmed: number;
  /** The prompt history at handover: prompts submitted at least once (and their share of the dataset), with a finished group, by how their latest group ended, skipped at least once. */
  prompts_visited: number;
  visited_share: number;
  prompts_seen: number;
  prompts_mixed: number;
  prompts_none_solved: number;
  prompts_all_solved: number;
  prompts_skipped: number;
  /** Selection's keep bases (GRESO's p_easy, p_hard) at handover. */
  keep_easy: number;
  keep_hard: number;
  /** Mean seconds per stage (queued, INIT, RUN, EVAL) of the rollouts that ended in the window. */
  queued_s_mean: number;
  init_s_mean: number;
  run_s_mean: number;
  eval_s_mean: number;
}

const num = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) ? v : 0);

/** The metrics.jsonl record of a batch (`elapsed_s` since the run started, `now` for the timestamp). */
export function stepRecord(b: Batch, elapsed_s: number, now: Date = new Date()): StepRecord {
  const s = b.stats as Batch['stats'] & Record<string, unknown>;
  const row = summarise(b);
  const finished = row.accepted + row.filtered + num(s.dropped_error);
  return {
    time: now.toISOString(),
    elapsed_s,
    ...row,
    finished,
    filtered_share: finished ? row.filtered / finished : 0,
    waste_fraction: row.tokens_generated ? row.tokens_wasted / row.tokens_generated : 0,
    submitted: num(s.submitted),
    completed: num(s.completed),
    errors: num(s.errors),
    dropped_stale: num(s.dropped_stale),
    dropped_error: num(s.dropped_error),
    jobs_submitted: num(s.jobs_submitted),
    jobs_cancelled: num(s.jobs_cancelled),
    tokens_used: num(s.tokens_used),
    tokens_filtered: num(s.tokens_filtered),
    running_at_handover: num(s.running_at_handover),
    buffered_after_handover: num(s.buffered_after_handover),
    max_inflight_jobs: num(s.max_inflight_jobs),
    staleness_histogram: (s.staleness_histogram as Record<string, number> | undefined) ?? {},
    skipped: num(s.skipped),
    skipped_easy: num(s.skipped_easy),
    skipped_hard: num(s.skipped_hard),
    explored: num(s.explored),
    mean_group_size: num(s.mean_group_size),
    rollouts_trimmed: num(s.rollouts_trimmed),
    tokens_trimmed: num(s.tokens_trimmed),
    prompts_visited: num(s.prompts_visited),
    visited_share: num(s.visited_share),
    prompts_seen: num(s.prompts_seen),
    prompts_mixed: num(s.prompts_mixed),
    prompts_none_solved: num(s.prompts_none_solved),
    prompts_all_solved: num(s.prompts_all_solved),
    prompts_skipped: num(s.prompts_skipped),
    keep_easy: num(s.keep_easy),
    keep_hard: num(s.keep_hard),
    queued_s_mean: num(s.queued_s_mean),
    init_s_mean: num(s.init_s_mean),
    run_s_mean: num(s.run_s_mean),
    eval_s_mean: num(s.eval_s_mean),
  };
}

/** The per-step line `raas train` prints: "accepted 4 of 16 finished groups (12 filtered)". */
export function stepLine(r: StepRecord): string {
  const dropped = (r.dropped_error ? `, ${r.dropped_error} dropped on error` : '') + (r.skipped ? `, ${r.skipped} prompts skipped` : '');
  return (
    `step ${String(r.step).padStart(3)} | v${r.policy_version} | ${r.wall_s.toFixed(2)}s | accepted ${r.accepted} of ${r.finished} finished groups (${r.filtered} filtered${dropped}), ` +
    `${r.groups} in the batch (${r.carried_over} carried over), ${r.cancelled} cancelled | reward ${r.mean_reward.toFixed(3)} (batch ${r.batch_mean_reward.toFixed(3)}) | ` +
    `${r.informative_groups_per_s.toFixed(2)} groups/s | util ${(r.worker_utilization * 100).toFixed(0)}% | waste ${(r.waste_fraction * 100).toFixed(0)}% | staleness ${r.staleness_mean.toFixed(2)}/${r.staleness_max}`
  );
}

/** "1 step", "2 steps". */
export const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? '' : 's'}`;

/** What the Prometheus gauges read at scrape time (the live coordinator, if any). */
export type StatusSource = () => CoordinatorStatus | undefined;

/**
 * The coordinator's Prometheus metrics (`raas train --metrics-port`, `raas sidecar --metrics-port`),
 * in a registry of their own. Live gauges are read from the coordinator's status() at scrape time;
 * per-step gauges and counters are set when a batch is handed over (`observe`).
 */
export class CoordinatorMetrics {
  readonly registry = new Registry();
  private source: StatusSource = () => undefined;
  private readonly steps: Counter;
  private readonly groups: Counter<'outcome'>;
  private readonly tokens: Counter<'kind'>;
  private readonly skipped: Counter<'kind'>;
  private readonly last: Map<string, Gauge>;

  constructor() {
    const registers = [this.registry];
    const live = (name: string, help: string, read: (s: CoordinatorStatus) => number): void => {
      const source = (): CoordinatorStatus | undefined => this.source();
      new Gauge({
        name,
        help,
        registers,
        collect() {
          const s = source();
          if (s) this.set(read(s));
        },
      });
    };
    live('raas_coordinator_policy_version', 'Current policy version', (s) => s.policy_version);
    live('raas_coordinator_step', 'Batches handed over so far', (s) => s.step);
    live('raas_coordinator_running_groups', 'Groups submitted and not ended', (s) => s.running_groups);
    live('raas_coordinator_running_jobs', 'Jobs in flight on the rollout servers', (s) => s.running_jobs);
    live('raas_coordinator_buffered_groups', 'Accepted groups waiting for a handover', (s) => s.buffered_groups);
    live('raas_coordinator_max_inflight_jobs', 'Admission cap (max_inflight_jobs)', (s) => s.max_inflight_jobs);
    live('raas_coordinator_paused', '1 while generation is paused', (s) => (s.paused ? 1 : 0));
    live('raas_coordinator_window_accepted_groups', 'Groups accepted in the current step window', (s) => s.window.accepted);
    live('raas_coordinator_window_filtered_groups', 'Groups filtered in the current step window', (s) => s.window.filtered);
    live('raas_coordinator_window_elapsed_seconds', 'Seconds since the last handover', (s) => s.window.elapsed_s);
    const source = (): CoordinatorStatus | undefined => this.source();
    new Gauge({
      name: 'raas_coordinator_server_healthy',
      help: 'Health of each rollout server (1 healthy)',
      labelNames: ['server'],
      registers,
      collect() {
        this.reset();
        for (const sv of source()?.servers ?? []) this.set({ server: sv.url }, sv.healthy ? 1 : 0);
      },
    });
    this.steps = new Counter({ name: 'raas_coordinator_steps_total', help: 'Batches handed over', registers });
    this.groups = new Counter({
      name: 'raas_coordinator_groups_total',
      help: 'Groups by outcome in handed-over windows (accepted, filtered, cancelled, dropped_stale, dropped_error)',
      labelNames: ['outcome'],
      registers,
    });
    this.tokens = new Counter({
      name: 'raas_coordinator_tokens_total',
      help: 'Tokens by kind in handed-over windows (generated, used, wasted, filtered)',
      labelNames: ['kind'],
      registers,
    });
    this.skipped = new Counter({
      name: 'raas_coordinator_prompts_skipped_total',
      help: 'Prompt turns selection skipped in handed-over windows, by the way their recent groups were uniform (easy, hard)',
      labelNames: ['kind'],
      registers,
    });
    const g = (name: string, help: string): [string, Gauge] => [
      name,
      new Gauge({ name: `raas_coordinator_last_step_${name}`, help: `Last step: ${help}`, registers }),
    ];
    this.last = new Map([
      g('mean_reward', 'mean reward of all rollouts completed in the window'),
      g('batch_mean_reward', 'mean reward of the batch'),
      g('informative_groups_per_second', 'accepted groups handed over per second of the window'),
      g('filtered_share', 'filtered / finished groups'),
      g('waste_fraction', 'wasted / generated tokens'),
      g('staleness_mean', 'mean rollout staleness in the batch'),
      g('staleness_max', 'largest rollout staleness in the batch'),
      g('wall_seconds', 'seconds the step window lasted'),
      g('worker_utilization', 'share of max_inflight_jobs busy over the window'),
      g('tokens_per_second', 'tokens generated per second of the window'),
    ]);
  }

  /** Where the live gauges read from (the sidecar's coordinator changes on resume). */
  setSource(source: StatusSource): void {
    this.source = source;
  }

  /** Records a handed-over step. */
  observe(r: StepRecord): void {
    this.steps.inc();
    for (const [k, v] of [
      ['accepted', r.accepted],
      ['filtered', r.filtered],
      ['cancelled', r.cancelled],
      ['dropped_stale', r.dropped_stale],
      ['dropped_error', r.dropped_error],
    ] as const)
      this.groups.inc({ outcome: k }, v);
    for (const [k, v] of [
      ['generated', r.tokens_generated],
      ['used', r.tokens_used],
      ['wasted', r.tokens_wasted],
      ['filtered', r.tokens_filtered],
    ] as const)
      this.tokens.inc({ kind: k }, v);
    this.skipped.inc({ kind: 'easy' }, r.skipped_easy);
    this.skipped.inc({ kind: 'hard' }, r.skipped_hard);
    const set = (k: string, v: number): void => this.last.get(k)!.set(v);
    set('mean_reward', r.mean_reward);
    set('batch_mean_reward', r.batch_mean_reward);
    set('informative_groups_per_second', r.informative_groups_per_s);
    set('filtered_share', r.filtered_share);
    set('waste_fraction', r.waste_fraction);
    set('staleness_mean', r.staleness_mean);
    set('staleness_max', r.staleness_max);
    set('wall_seconds', r.wall_s);
    set('worker_utilization', r.worker_utilization);
    set('tokens_per_second', r.tokens_per_s);
  }
}
