import type { Batch, BatchStats } from '../protocol/batch.js';
import type { TrainConfig } from '../protocol/config-train.js';
import type { Result } from '../protocol/process.js';
import type { Clock } from '../util/clock.js';
import type { RaasError } from '../protocol/errors.js';
import type { Prompt, PromptDataset } from './dataset.js';
import {
  type GroupRecord,
  groupId,
  groupRequests,
  judgeGroup,
  resultTokens,
  toBatchGroup,
  isErrorResult,
  type Verdict,
  type EndedVerdict,
} from './group.js';
import { StepGuard } from './guard.js';
import { PromptHistory, type HistoryGroup } from './history.js';
import { PromptIntake, type NextPrompt } from './intake.js';
import { Selector, type Decision, type SelectorState } from './selection.js';
import { StepWindow } from './window.js';

/**
 * A result as the core keeps it when batches carry no messages: the trajectory's text (every
 * observation, tool output and answer, already in the token view) is the bulk of a result and
 * would stay in memory until its group is handed over.
 */
function withoutMessages(r: Result): Result {
  if (r.messages.length === 0 && !r.trailing_messages?.length) return r;
  const { trailing_messages: _t, ...rest } = r;
  return { ...rest, messages: [] };
}

/** Why the coordinator cancels a running group. */
export type CancelReason = 'handover' | 'stale' | 'close';

/** Run-level totals (summary.json, benchmarks). */
export interface CoreTotals {
  groups_submitted: number;
  jobs_submitted: number;
  accepted: number;
  handed: number;
  filtered: number;
  cancelled: number;
  dropped_stale: number;
  dropped_error: number;
  tokens_generated: number;
  tokens_used: number;
  tokens_wasted: number;
  tokens_filtered: number;
  /** Prompts selection skipped. */
  skipped: number;
  /** Fixed-n batches: rollouts of larger groups left out of their batch. */
  rollouts_trimmed: number;
}

/** What a core starts from besides the config (a resumed run's history and selector state). */
export interface CoreRestore {
  history?: PromptHistory;
  selector?: SelectorState;
}

/**
 * The DAPO coordinator's pure logic, without HTTP: admission, acceptance, handover, carry-over with
 * the staleness bound, and waste accounting, exactly as docs/training.md defines them. The driver
 * (Coordinator) submits what `admit()` returns, feeds results to `onResult()`, and sends the cancels
 * that `handover()`, `setVersion()` and `cancelAll()` return. Time comes from the injected clock.
 */
export class DapoCore {
  version = 0;
  /** Index of the next batch (= batches handed over so far). */
  step = 0;
  nextIndex = 0;
  readonly groups = new Map<number, GroupRecord>();
  private readonly byJob = new Map<string, { g: GroupRecord; k: number }>();
  /** Jobs submitted and not ended, in any group state (they occupy workers). */
  runningJobs = 0;
  /** Sync mode submits only while a consumer waits for a batch. */
  demand = false;
  /** Generation is paused (a co-located trainer's step): nothing is admitted until the resume. */
  paused = false;
  window: StepWindow;
  readonly totals: CoreTotals = {
    groups_submitted: 0,
    jobs_submitted: 0,
    accepted: 0,
    handed: 0,
    filtered: 0,
    cancelled: 0,
    dropped_stale: 0,
    dropped_error: 0,
    tokens_generated: 0,
    tokens_used: 0,
    tokens_wasted: 0,
    tokens_filtered: 0,
    skipped: 0,
    rollouts_trimmed: 0,
  };
  /** Per prompt: its groups' rewards, submissions and skips (checkpointed, `prompts.jsonl`). */
  readonly history: PromptHistory;
  readonly selector: Selector;
  private readonly intake: PromptIntake;
  private readonly guard: StepGuard;
  /** Set when a step finished max_groups_per_step groups without a batch: nothing is admitted any more. */
  stalled: RaasError | undefined;
  /** Warnings for the driver to show (it drains the list). */
  readonly warnings: string[] = [];
  /** Called when a group leaves without reaching a batch (filtered, dropped, cancelled), in the step window it left in. */
  onGroupEnd: ((g: GroupRecord, verdict: EndedVerdict, step: number) => void) | undefined;

  constructor(
    readonly cfg: TrainConfig,
    readonly dataset: PromptDataset,
    private readonly clock: Clock,
    /** max_inflight_jobs: admission cap and the utilization denominator (see setCapacity). */
    public capacity: number,
    restore: CoreRestore = {},
  ) {
    this.window = new StepWindow(clock.now());
    this.history = restore.history ?? new PromptHistory();
    this.selector = new Selector(cfg.selection, cfg.batch_size, restore.selector);
    this.intake = new PromptIntake(cfg, dataset, this.history, this.selector);
    this.guard = new StepGuard(cfg);
  }

  /**
   * Live groups by state, kept up to date at every state change: admission and handover read them
   * after every result, and with thousands of groups in flight a scan of every group per result
   * would make the coordinator's cost per job grow with the fleet.
   */
  private readonly buffered = new Set<GroupRecord>();
  private running = 0;
  private cancelling = 0;

  get runningGroups(): number {
    return this.running;
  }
  /** Accepted groups not handed over yet, oldest first (sorted on each call: read it once per step, not per event). */
  get bufferedGroups(): GroupRecord[] {
    return [...this.buffered].sort((a, b) => a.index - b.index);
  }
  get bufferedCount(): number {
    return this.buffered.size;
  }
  get cancellingGroups(): number {
    return this.cancelling;
  }

  /** Changes a tracked group's state and the live counts with it. */
  private setState(g: GroupRecord, state: GroupRecord['state']): void {
    const tracked = this.groups.get(g.index) === g;
    if (tracked) this.count(g, -1);
    g.state = state;
    if (tracked) this.count(g, 1);
  }

  private count(g: GroupRecord, d: 1 | -1): void {
    if (g.state === 'running') this.running += d;
    else if (g.state === 'cancelling') this.cancelling += d;
    else if (g.state === 'buffered') {
      if (d > 0) this.buffered.add(g);
      else this.buffered.delete(g);
    }
  }

  /** Batches carry each rollout's messages (return_messages). */
  private get withMessages(): boolean {
    return this.cfg.return_messages || this.cfg.sampling_params.return_messages === true;
  }

  private tick(): void {
    this.window.integrate(this.clock.now(), this.runningJobs, this.capacity);
  }

  /**
   * The admission cap follows the live fleet (the driver sets it before each admission): a server
   * that went down takes its workers out, one that came back brings them in. Jobs already running
   * above a lowered cap finish; nothing new is admitted until they fall below it.
   */
  setCapacity(c: number): void {
    if (c === this.capacity) return;
    this.tick(); // the window's occupancy integral up to now uses the old cap
    this.capacity = Math.max(0, c);
  }

  /** Groups to submit now (already counted as running); none while paused. */
  admit(): GroupRecord[] {
    const out: GroupRecord[] = [];
    if (this.paused || this.stalled) return out;
    const { batch_size: B, max_staleness } = this.cfg;
    if (this.cfg.mode === 'sync') {
      if (!this.demand || this.runningGroups > 0 || this.cancellingGroups > 0) return out;
      const missing = B - this.buffered.size;
      for (let i = 0; i < missing; i++) {
        const g = this.newGroup(() => true);
        if (!g) break;
        out.push(g);
      }
      return out;
    }
    // Groups being cancelled still hold their place until every cancel is confirmed: counting them
    // keeps the number of groups in the system (and so the staleness they can reach) within the bound.
    const held = this.buffered.size + this.cancelling;
    let running = this.running;
    const fits = (n: number): boolean => this.runningJobs + n <= this.capacity || this.runningJobs === 0;
    while (held + running < (max_staleness + 1) * B) {
      const g = this.newGroup(fits);
      if (!g) break;
      out.push(g);
      running++;
    }
    return out;
  }

  /** The next group, if the dataset has a prompt selection submits and its size `fits`. */
  private newGroup(fits: (n: number) => boolean): GroupRecord | undefined {
    const next = this.intake.next(this.version, this.step, fits, (p, d) => this.countSkip(p, d));
    return next ? this.startGroup(next) : undefined;
  }

  private countSkip(_p: Prompt, d: Decision): void {
    this.window.skipped++;
    if (d.streak?.kind === 'easy') this.window.skippedEasy++;
    else this.window.skippedHard++;
    this.totals.skipped++;
  }

  private startGroup(next: NextPrompt): GroupRecord {
    const { prompt, n } = next;
    const index = this.nextIndex++;
    const g: GroupRecord = {
      index,
      id: groupId(this.cfg.name, index),
      prompt,
      requests: groupRequests(this.cfg, prompt, index, this.version, n),
      submittedVersion: this.version,
      submittedStep: this.step,
      state: 'running',
      results: new Array(n).fill(undefined),
      ended: 0,
      tokens: 0,
      ...(next.keep < 1 ? { selectKeep: next.keep } : {}),
    };
    this.track(g);
    if (next.keep < 1 || next.forced) this.window.explored++;
    this.window.submitted++;
    this.window.nSum += n;
    this.window.jobsSubmitted += n;
    this.totals.groups_submitted++;
    this.totals.jobs_submitted += n;
    return g;
  }

  /** Registers a group (new, or restored from a checkpoint) and counts its unfinished jobs as running. */
  track(g: GroupRecord): void {
    this.tick();
    const old = this.groups.get(g.index);
    if (old) this.count(old, -1);
    this.groups.set(g.index, g);
    this.count(g, 1);
    g.requests.forEach((r, k) => this.byJob.set(r.job_id!, { g, k }));
    if (g.state === 'running') this.runningJobs += g.results.filter((r) => r === undefined).length;
  }

  /** Re-adds a group from a checkpoint: a buffered one is judged again (rewards and advantages are deterministic). */
  restoreGroup(g: GroupRecord): void {
    for (const r of g.results) if (r) g.tokens += resultTokens(r);
    if (g.state === 'buffered' && judgeGroup(g, this.cfg) !== 'accepted') g.state = 'dropped';
    if (g.state === 'dropped') return;
    this.track(g);
  }

  /** The group a job belongs to, if the coordinator still tracks it. */
  groupOfJob(jobId: string): GroupRecord | undefined {
    return this.byJob.get(jobId)?.g;
  }

  /** Records a job's terminal result. The first terminal result of a job id counts; duplicates are ignored. */
  onResult(jobId: string, result: Result): void {
    const hit = this.byJob.get(jobId);
    if (!hit || hit.g.results[hit.k] !== undefined) return;
    const { g, k } = hit;
    this.tick();
    g.results[k] = this.withMessages ? result : withoutMessages(result);
    g.ended++;
    this.runningJobs--;
    const tokens = resultTokens(result);
    g.tokens += tokens;
    this.window.addTiming(result.timing);
    this.window.tokensGenerated += tokens;
    this.totals.tokens_generated += tokens;
    if (isErrorResult(result) && g.state === 'running') this.window.errors++;
    if (g.state === 'cancelling' || g.state === 'dropped' || g.state === 'cancelled') {
      // A result for a discarded group is waste and never enters a batch.
      this.waste(tokens);
      if (g.state === 'cancelling' && g.ended === g.results.length) this.finishGroup(g, 'cancelled');
      return;
    }
    if (g.state !== 'running' || g.ended < g.results.length) return;
    this.window.completed++;
    for (const r of g.results as Result[])
      if (!isErrorResult(r)) {
        this.window.rewardSum += r.reward;
        this.window.rewardCount++;
      }
    const verdict = judgeGroup(g, this.cfg);
    if (verdict === 'accepted') {
      this.setState(g, 'buffered');
      this.window.accepted++;
      this.totals.accepted++;
    } else if (verdict === 'filtered') {
      this.finishGroup(g, 'filtered');
      this.onGroupEnd?.(g, 'filtered', this.step);
      this.window.filtered++;
      this.totals.filtered++;
      this.window.tokensFiltered += g.tokens;
      this.totals.tokens_filtered += g.tokens;
    } else {
      this.finishGroup(g, 'dropped');
      this.onGroupEnd?.(g, 'dropped_error', this.step);
      this.window.droppedError++;
      this.totals.dropped_error++;
      this.waste(g.tokens);
    }
    this.learn(g, verdict);
  }

  /** A finished group enters the prompt's history, the selector adapts, and the step guard looks. */
  private learn(g: GroupRecord, verdict: Verdict): void {
    const results = g.results as Result[];
    const clean = results.filter((r) => !isErrorResult(r));
    // What acceptance judged: with on_error zero_reward a failed rollout counts as reward 0.
    const rewards =
      this.cfg.on_error === 'zero_reward' ? results.map((r) => (isErrorResult(r) ? 0 : r.reward)) : clean.map((r) => r.reward);
    const h: HistoryGroup = { step: this.step, version: g.submittedVersion, rewards, errors: results.length - clean.length, verdict };
    this.history.recordGroup(g.prompt, h);
    this.selector.observe(h);
    if (verdict === 'filtered') this.window.uniformAt.set(rewards[0] ?? 0, (this.window.uniformAt.get(rewards[0] ?? 0) ?? 0) + 1);
    const { warning, error } = this.guard.check(this.window, this.step, this.ready());
    if (warning) this.warnings.push(warning);
    if (error) this.stalled ??= error;
  }

  private waste(tokens: number): void {
    this.window.tokensWasted += tokens;
    this.totals.tokens_wasted += tokens;
  }

  /** Terminal groups leave the tables (their late duplicates are then ignored by id). */
  private finishGroup(g: GroupRecord, state: 'handed' | 'filtered' | 'dropped' | 'cancelled'): void {
    this.setState(g, state);
    if (state === 'cancelled' || g.ended === g.results.length) {
      this.groups.delete(g.index);
      for (const r of g.requests) this.byJob.delete(r.job_id!);
    }
  }

  /** Cancels a running group; returns the ids of its jobs that have not ended (the driver cancels them). */
  private cancelGroup(g: GroupRecord, reason: CancelReason): string[] {
    this.setState(g, 'cancelling');
    this.window.cancelled++;
    this.totals.cancelled++;
    if (reason === 'stale') {
      this.window.droppedStale++;
      this.totals.dropped_stale++;
    }
    this.waste(g.tokens);
    this.onGroupEnd?.(g, reason === 'stale' ? 'dropped_stale' : 'cancelled', this.step);
    const pending = g.requests.filter((_, k) => g.results[k] === undefined).map((r) => r.job_id!);
    this.window.jobsCancelled += pending.length;
    if (pending.length === 0) this.finishGroup(g, 'cancelled');
    return pending;
  }

  private dropStale(g: GroupRecord): void {
    this.onGroupEnd?.(g, 'dropped_stale', this.step);
    this.window.droppedStale++;
    this.totals.dropped_stale++;
    this.waste(g.tokens);
    this.finishGroup(g, 'dropped');
  }

  /** Applies the staleness bound for a handover under version `at`: drops buffered and cancels running groups that would exceed it. */
  private enforceBound(at: number, cancelRunning: boolean): string[] {
    const cancels: string[] = [];
    for (const g of [...this.groups.values()]) {
      if (at - g.submittedVersion <= this.cfg.max_staleness) continue;
      if (g.state === 'buffered') this.dropStale(g);
      else if (g.state === 'running' && cancelRunning) cancels.push(...this.cancelGroup(g, 'stale'));
    }
    return cancels;
  }

  /**
   * True when a handover can happen now. The bound needs no check here: setVersion() enforces it
   * whenever the version rises, and a group submitted since has staleness 0.
   */
  ready(): boolean {
    if (this.buffered.size < this.cfg.batch_size) return false;
    if (this.cfg.mode === 'sync') return this.running === 0;
    if (!this.cfg.ordered_handover) return true;
    // ordered_handover: no group submitted before the last one chosen may still change the choice.
    const last = this.bufferedGroups[this.cfg.batch_size - 1]!.index;
    for (const g of this.groups.values()) if (g.state === 'running' && g.index < last) return false;
    return true;
  }

  /**
   * Hands over the `batch_size` groups submitted earliest; the rest stay buffered. Then, without
   * carry-over every running group is cancelled; with carry-over only those whose staleness at the
   * next handover (one update later) would exceed max_staleness, and buffered groups past that bound
   * are dropped. Call only when ready().
   */
  handover(): { batch: Batch; cancels: string[] } {
    this.tick();
    const v = this.version;
    const chosen = this.bufferedGroups.slice(0, this.cfg.batch_size);
    const groups = chosen.map((g) => toBatchGroup(g, v, this.withMessages));
    const staleness = groups.flatMap((g) => g.rollouts.map((r) => r.staleness));
    const rewards = groups.flatMap((g) => g.rollouts.map((r) => r.reward));
    let tokensUsed = 0;
    let carried = 0;
    for (const g of chosen) {
      tokensUsed += g.tokens - this.trim(g);
      if (g.submittedStep < this.step) carried++;
      this.finishGroup(g, 'handed');
    }
    this.totals.handed += chosen.length;
    this.totals.tokens_used += tokensUsed;
    const cancels: string[] = [];
    if (this.cfg.mode === 'async') {
      if (!this.cfg.carry_over) {
        for (const g of [...this.groups.values()]) if (g.state === 'running') cancels.push(...this.cancelGroup(g, 'handover'));
      }
      cancels.push(...this.enforceBound(v + 1, true));
    }
    const now = this.clock.now();
    const stats: BatchStats = this.window.finish(now, this.capacity, {
      carried_over: carried,
      tokens_used: tokensUsed,
      staleness,
      batch_rewards: rewards,
      running_at_handover: this.running,
      buffered_after_handover: this.buffered.size,
      batch_size: chosen.length,
      selection: this.selectionStats(),
    });
    // Per batch group, the probability its prompt was submitted with: a trainer may weight a group by
    // 1 / keep to undo selection's tilt toward prompts that were informative lately (docs/training.md).
    (stats as Record<string, unknown>).group_keep = chosen.map((g) => g.selectKeep ?? 1);
    const batch: Batch = { step: this.step, policy_version: v, groups, stats };
    this.step++;
    this.window = new StepWindow(now);
    return { batch, cancels };
  }

  /** Fixed-n batches: the tokens of a group's rollouts left out of the batch (counted as waste). */
  private trim(g: GroupRecord): number {
    if (!g.keep) return 0;
    const kept = new Set(g.keep);
    let tokens = 0;
    (g.results as Result[]).forEach((r, k) => {
      if (!kept.has(k)) tokens += resultTokens(r);
    });
    const rollouts = g.results.length - g.keep.length;
    this.window.rolloutsTrimmed += rollouts;
    this.window.tokensTrimmed += tokens;
    this.totals.rollouts_trimmed += rollouts;
    this.waste(tokens);
    return tokens;
  }

  /** The history and selector figures every batch's stats carry (metrics.jsonl). */
  selectionStats(): Record<string, number> {
    const h = this.history.summary();
    const st = this.selector.state();
    const size = this.dataset.rows.length;
    return {
      ...h,
      dataset_size: size,
      visited_share: size ? h.prompts_visited / size : 0,
      keep_easy: st.keep_easy,
      keep_hard: st.keep_hard,
      uniform_share_easy: st.share_easy,
      uniform_share_hard: st.share_hard,
    };
  }

  /** A weight update: the version rises; groups that can no longer meet the bound are cancelled or dropped. */
  setVersion(v: number): string[] {
    this.tick();
    this.version = v;
    return this.enforceBound(v, true);
  }

  /** Cancels every running group (close, failing trainer command). */
  cancelAll(): string[] {
    this.tick();
    const cancels: string[] = [];
    for (const g of [...this.groups.values()]) if (g.state === 'running') cancels.push(...this.cancelGroup(g, 'close'));
    return cancels;
  }

  /** No prompt left, nothing running, and too few buffered groups for another batch. */
  exhausted(): boolean {
    return this.dataset.exhausted && this.running === 0 && this.buffered.size < this.cfg.batch_size;
  }

  /** What is still in flight or buffered (reported separately from waste at the end of a run). */
  leftovers(): {
    running_groups: number;
    running_jobs: number;
    buffered_groups: number;
    tokens_in_running: number;
    tokens_in_buffered: number;
  } {
    let tr = 0,
      tb = 0;
    for (const g of this.groups.values()) {
      if (g.state === 'running') tr += g.tokens;
      if (g.state === 'buffered') tb += g.tokens;
    }
    return {
      running_groups: this.running,
      running_jobs: this.runningJobs,
      buffered_groups: this.buffered.size,
      tokens_in_running: tr,
      tokens_in_buffered: tb,
    };
  }
}
