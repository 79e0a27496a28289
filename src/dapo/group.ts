import type { Message, ProcessRequest, Result } from '../protocol/process.js';
import type { Group, Rollout } from '../protocol/batch.js';
import type { TrainConfig } from '../protocol/config-train.js';
import type { Prompt } from './dataset.js';
import { generatedTokens, groupAdvantages, isInformative, shapedReward } from './rewards.js';
import { keepSeed, keptRollouts } from './adaptive-n.js';

/**
 * Where a group is in its life. `running`: submitted, some rollouts not ended. `buffered`: accepted,
 * waiting for a handover. `cancelling`: cancelled by the coordinator, cancels not yet confirmed.
 * Terminal: `handed` (in a batch), `filtered` (zero variance), `dropped` (errors or staleness),
 * `cancelled` (every cancel confirmed).
 */
type GroupState = 'running' | 'buffered' | 'cancelling' | 'handed' | 'filtered' | 'dropped' | 'cancelled';

/** One prompt's n rollouts as the coordinator tracks them. */
export interface GroupRecord {
  index: number;
  id: string;
  prompt: Prompt;
  requests: ProcessRequest[];
  submittedVersion: number;
  /** The step window the group was submitted in (a batch of a later step counts it as carried over). */
  submittedStep: number;
  state: GroupState;
  results: Array<Result | undefined>;
  ended: number;
  /** Model-generated tokens of the results that arrived. */
  tokens: number;
  /** Accepted groups: rewards after on_error, shaping, and advantages. */
  rewards?: number[];
  shaped?: number[];
  advantages?: number[];
  /** Server the group went to, when the fleet says (checkpoints re-attach there). */
  server?: string;
  /** Fixed-n batches of adaptive n: the rollouts (ascending indices) that go into the batch; absent: all. */
  keep?: number[];
  /** The probability selection submitted the prompt with (absent: 1, it was not a candidate to skip). */
  selectKeep?: number;
}

/** Deterministic ids: a seeded run is reproducible and a restart re-attaches by id. */
export function groupId(run: string, index: number): string {
  return `${run}-g${index}`;
}
export function jobId(run: string, index: number, k: number): string {
  return `${run}-g${index}-r${k}`;
}

/** Builds the n /process requests of a group (the fleet sends them with `attach: true`, so a resume re-attaches by id). */
export function groupRequests(cfg: TrainConfig, prompt: Prompt, index: number, version: number, n: number = cfg.n): ProcessRequest[] {
  const sampling = { ...cfg.sampling_params, seed: cfg.sampling_params.seed ?? cfg.seed };
  const out: ProcessRequest[] = [];
  for (let k = 0; k < n; k++) {
    out.push({
      instance: { ...prompt, trajectory_id: k },
      sampling_params: sampling,
      job_id: jobId(cfg.name, index, k),
      group_id: groupId(cfg.name, index),
      policy_version: version,
      ...(cfg.timeout_s !== undefined ? { timeout_s: cfg.timeout_s } : {}),
    });
  }
  return out;
}

/** An ended rollout that failed (anything but a clean end, including a cancel we did not ask for). */
export function isErrorResult(r: Result): boolean {
  return r.critical_error !== null;
}

/**
 * A rollout that ended cleanly but whose reward the grader marked unreliable (`filter: true` with
 * its `filter_reason`: a truncated test log, tampered grading files, an eval out of memory). ProRL's
 * own rule also marks every run the agent did not end itself (`not_finished`: max turns, max
 * tokens); those rewards are facts (overlong shaping handles length), so they are kept.
 */
function isUnreliableResult(r: Result): boolean {
  return r.filter === true && r.critical_error === null && r.filter_reason !== 'not_finished';
}

/** Model-generated tokens of a result. */
export function resultTokens(r: Result): number {
  return generatedTokens(r.tokens?.response_mask ?? []);
}

/** Acceptance verdict of a group whose n rollouts ended. */
export type Verdict = 'accepted' | 'filtered' | 'dropped_error';

/**
 * Decides acceptance (docs/training.md): errors follow on_error, a rollout marked `filter` drops
 * its group; the group is accepted when its task
 * rewards (before shaping) are not all equal. Fills rewards, shaped rewards and advantages; with
 * adaptive n's fixed batches, a group larger than n keeps n rollouts (`keep`) and its rewards and
 * advantages are those of the kept ones, as the trainer will compute them.
 */
export function judgeGroup(g: GroupRecord, cfg: TrainConfig): Verdict {
  const results = g.results as Result[];
  const errored = results.some(isErrorResult);
  if (errored && cfg.on_error === 'drop_group') return 'dropped_error';
  // An unreliable reward is not a fact about the policy: the group goes, whatever on_error says
  // (scoring it 0 would teach the policy against a broken grader).
  if (results.some(isUnreliableResult)) return 'dropped_error';
  const all = results.map((r) => (isErrorResult(r) ? 0 : r.reward));
  if (!isInformative(all)) return 'filtered';
  const fixed = cfg.selection.adaptive_n?.batch === 'fixed' && results.length > cfg.n;
  g.keep = fixed ? keptRollouts(all, cfg.n, keepSeed(cfg.seed, g.index)) : undefined;
  const kept = g.keep ?? all.map((_, i) => i);
  g.rewards = kept.map((i) => all[i]!);
  g.shaped = kept.map((i, j) => shapedReward(g.rewards![j]!, resultTokens(results[i]!), cfg.overlong));
  g.advantages = groupAdvantages(g.shaped);
  return 'accepted';
}

/** How a group left without reaching a batch. */
export type EndedVerdict = 'filtered' | 'dropped_error' | 'dropped_stale' | 'cancelled';

/** One line of `groups.jsonl`: a group that did not reach a batch, with the rollouts that had ended. */
export interface EndedGroupLine {
  step: number;
  group_id: string;
  instance_id: string | number | null;
  data_source: string;
  verdict: EndedVerdict;
  policy_version: number;
  rewards: number[];
  errors: number;
  rollouts: Array<Record<string, unknown> & { job_id: string; reward: number }>;
}

/**
 * The `groups.jsonl` line of a group that left without a batch: each ended rollout's outcome and
 * grader details, and with `full` its token view (and messages when the run asks for them).
 */
export function endedGroupLine(g: GroupRecord, verdict: EndedVerdict, step: number, full: boolean, withMessages: boolean): EndedGroupLine {
  const ended = g.results.filter((r): r is Result => r !== undefined);
  return {
    step,
    group_id: g.id,
    instance_id: g.prompt.instance_id,
    data_source: g.prompt.data_source,
    verdict,
    policy_version: g.submittedVersion,
    rewards: ended.filter((r) => !isErrorResult(r)).map((r) => r.reward),
    errors: ended.filter(isErrorResult).length,
    rollouts: ended.map((r) => ({
      job_id: r.job_id,
      trajectory_id: r.trajectory_id,
      reward: r.reward,
      policy_version: g.submittedVersion,
      weight_versions: r.weight_versions ?? [],
      finish_reason: r.finish_reason,
      num_turns: r.num_turns,
      critical_error: r.critical_error,
      ...(r.error ? { error: r.error } : {}),
      ...(r.details ? { details: r.details as Record<string, unknown> } : {}),
      ...(full ? { tokens: r.tokens } : {}),
      ...(full && withMessages ? { messages: batchMessages(r) } : {}),
    })),
  };
}

/** The batch view of an accepted group at handover under policy version `version`. */
export function toBatchGroup(g: GroupRecord, version: number, withMessages: boolean): Group {
  const staleness = version - g.submittedVersion;
  const results = g.results as Result[];
  const kept = g.keep ?? results.map((_, k) => k);
  const rollouts: Rollout[] = kept
    .map((k, j) => ({ r: results[k]!, k, j }))
    .map(({ r, k, j }) => ({
      job_id: r.job_id,
      trajectory_id: r.trajectory_id ?? k,
      reward: g.rewards![j]!,
      shaped_reward: g.shaped![j]!,
      advantage: g.advantages![j]!,
      policy_version: g.submittedVersion,
      staleness,
      weight_versions: r.weight_versions ?? [],
      finish_reason: r.finish_reason,
      num_turns: r.num_turns,
      tokens: r.tokens,
      // A harness rollout of several sequences carries them all; one of one sequence keeps today's shape.
      ...(r.segments && r.segments.length > 1 ? { segments: r.segments } : {}),
      ...(withMessages ? { messages: batchMessages(r) } : {}),
      // Why the rollout got its reward: the grader's details, and a failure's critical_error and error.
      ...(r.details ? { details: r.details as Record<string, unknown> } : {}),
      ...(r.critical_error ? { critical_error: r.critical_error, error: r.error } : {}),
    }));
  return { group_id: g.id, instance_id: g.prompt.instance_id, data_source: g.prompt.data_source, rollouts };
}

/**
 * A rollout's whole message list for a batch: the result's `messages` (ProRL-trimmed) followed by
 * its `trailing_messages`, which is what `tokens.spans` index; each assistant message carries its
 * generated `token_ids` and `logprobs`, cut from the training view along its span.
 */
export function batchMessages(r: Result): Message[] {
  const all = r.trailing_messages?.length ? [...r.messages, ...r.trailing_messages] : [...r.messages];
  const t = r.tokens;
  for (const s of t.spans ?? []) {
    const m = all[s.message_index];
    if (m?.role !== 'assistant' || m.token_ids !== undefined) continue;
    all[s.message_index] = { ...m, token_ids: t.response_ids.slice(s.start, s.end), logprobs: t.logprobs.slice(s.start, s.end) };
  }
  return all;
}
