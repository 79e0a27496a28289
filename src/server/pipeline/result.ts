import type { FinishReason, Message, Result, Tokens } from '../../protocol/process.js';
import type { RunResult } from '../handlers/types.js';
import type { Job } from './job.js';

/** Empty training view. */
function emptyTokens(): Tokens {
  return { prompt_ids: [], response_ids: [], response_mask: [], logprobs: [] };
}

/** The RunResult EVAL sees when RUN failed or produced nothing. */
export function fallbackRun(finish: FinishReason = 'error'): RunResult {
  return { messages: [], tokens: emptyTokens(), finish_reason: finish, artifacts: {}, num_turns: 0 };
}

/** Finish reasons that mean the trajectory ended on its own terms. */
const PROPER: ReadonlySet<FinishReason> = new Set(['finish', 'max_iterations', 'max_response_tokens', 'max_model_len']);

/**
 * Builds a job's result: base fields, then RunResult, then EvalResult, then the hooks' patches
 * (exception fallbacks and finalResult), in that order; then what only the pipeline knows (state,
 * timing, backend); then ProRL's rules: a failed rollout (critical_error set) has reward 0 and
 * resolved false, `filter` as ProRL's final_result sets it, messages end with the last assistant
 * message, and token fields on messages only when the client asked for them.
 */
export function buildResult(
  job: Job,
  parts: { eval?: { reward: number; resolved: boolean; details?: Record<string, unknown>; filter_reason?: string } },
  timing: Result['timing'],
): Result {
  const inst = job.instance as { instance_id?: string | number; trajectory_id?: string | number };
  const raw = job.request.instance as { instance_id?: string | number; trajectory_id?: string | number };
  const run = job.run;
  const gitPatch = typeof run?.artifacts?.git_patch === 'string' ? run.artifacts.git_patch : null;
  let r: Result = {
    instance_id: inst?.instance_id ?? raw.instance_id ?? null,
    trajectory_id: inst?.trajectory_id ?? raw.trajectory_id ?? null,
    git_patch: gitPatch,
    success: false,
    finish: false,
    messages: run ? run.messages : [],
    tools: run?.tools || [],
    end_properly: false,
    resolved: false,
    critical_error: null,
    filter: false,
    filter_reason: null,
    error: null,
    job_id: job.id,
    data_source: job.handler.name,
    reward: 0,
    finish_reason: 'error',
    backend: null,
    policy_version: job.request.policy_version ?? null,
    weight_versions: [],
    num_turns: 0,
    timing,
    tokens: run ? run.tokens : emptyTokens(),
  };
  if (run) {
    r.finish_reason = run.finish_reason;
    r.num_turns = run.num_turns ?? countAssistant(run.messages);
  }
  if (parts.eval) {
    r.reward = parts.eval.reward;
    r.resolved = parts.eval.resolved;
    if (parts.eval.details) r.details = parts.eval.details;
  }
  r.critical_error = job.criticalError;
  r.error = job.errorMessage;
  if (job.traceback !== undefined) r.traceback = job.traceback;
  for (const p of job.patches) r = { ...r, ...p };
  const patched = job.patches.length > 0;
  if (job.state === 'cancelled') {
    r.critical_error = 'cancelled';
    r.finish_reason = 'cancelled';
  } else if (job.state === 'timed_out') {
    r.critical_error = 'timeout';
    r.finish_reason = 'timeout';
  }
  const session = job.session;
  if (session) {
    r.backend = session.backend;
    r.weight_versions = session.turns.map((t) => t.weight_version);
  }
  // ProRL's success: the agent run ended without error (its own finish), unless the handler said otherwise.
  if (!patched || !job.patches.some((p) => typeof p.success === 'boolean')) {
    r.success = run?.finish_reason === 'finish' && r.critical_error !== 'init' && r.critical_error !== 'run';
  }
  r.finish = r.finish_reason === 'finish';
  r.end_properly = r.critical_error === null && PROPER.has(r.finish_reason);
  if (r.critical_error !== null) {
    r.reward = 0;
    r.resolved = false;
  }
  r.filter = prorlFilter(r);
  r.filter_reason = r.filter ? filterReason(r) : null;
  // The handler's reason marks the result whatever ProRL's rule said (a critical error keeps its own).
  const handlerReason = parts.eval?.filter_reason;
  if (handlerReason && r.critical_error === null) {
    r.filter = true;
    r.filter_reason = handlerReason;
  }
  r.timing = timing;
  const sp = job.request.sampling_params;
  const ids = sp.token_level_generation === true || sp.return_message_ids === true;
  if (r.messages.length === 0) {
    r.trailing_messages = [];
    return r;
  }
  const { kept, trailing } = trimTrailing(r.messages);
  r.messages = ids ? kept : kept.map(stripIds);
  r.trailing_messages = ids ? trailing : trailing.map(stripIds);
  return r;
}

function countAssistant(messages: Message[]): number {
  let n = 0;
  for (const m of messages) if (m.role === 'assistant') n++;
  return n;
}

/**
 * ProRL's `filter` (openhands/nvidia/utils.py final_result, determine_filter): true on a critical
 * error, false on success, false when the failure is an AgentToolCallError (worth training on),
 * else true.
 */
export function prorlFilter(r: Pick<Result, 'critical_error' | 'success' | 'error'>): boolean {
  if (r.critical_error !== null) return true;
  if (r.success) return false;
  return !(r.error ?? '').includes('AgentToolCallError');
}

/** Why ProRL's rule filtered a result: its critical error, else that the agent did not finish on its own. */
function filterReason(r: Pick<Result, 'critical_error'>): string {
  return r.critical_error ?? 'not_finished';
}

/** Splits off the messages after the last assistant message (all of them when there is none), as ProRL trims its output. */
export function trimTrailing(messages: Message[]): { kept: Message[]; trailing: Message[] } {
  let end = messages.length;
  while (end > 0 && messages[end - 1]!.role !== 'assistant') end--;
  return end === messages.length ? { kept: messages, trailing: [] } : { kept: messages.slice(0, end), trailing: messages.slice(end) };
}

/** A message without token fields (ProRL adds them only under token_level_generation). */
function stripIds(m: Message): Message {
  if (m.token_ids === undefined && m.input_ids === undefined && m.logprobs === undefined) return m;
  const { token_ids: _t, input_ids: _i, logprobs: _l, ...rest } = m;
  return rest;
}

/**
 * A finished job's result as JSON text, with its timing (ProRL's keys and ours). A result that
 * cannot be serialized (a handler put a cycle, a BigInt or a structure nested past V8's limit into
 * it) is answered without the rollout's messages, tokens and hook fields, with the serializer's
 * error: the job is never left without an answer.
 */
export function resultJson(job: Job, evalResult: Parameters<typeof buildResult>[1]['eval'], now: number): { json: string; result: Result } {
  const { init, run, eval: ev } = job.stageSeconds;
  const queued = Math.max(0, (now - job.createdAt) / 1000 - (init + run + ev));
  const counted = job.timer.elapsedMs() / 1000;
  const timing = {
    init_time: init,
    run_time: run,
    eval_time: ev,
    others_time: queued,
    counted_elapsed: counted,
    timeout_triggered: job.state === 'timed_out',
    queued_s: queued,
    init_s: init,
    run_s: run,
    eval_s: ev,
    counted_s: counted,
  };
  try {
    const result = buildResult(job, { eval: evalResult }, timing);
    return { json: JSON.stringify(result), result };
  } catch (err) {
    job.run = undefined;
    job.patches = [];
    job.criticalError ??= 'eval';
    job.errorMessage = `the result could not be serialized (${(err instanceof Error ? err.message : String(err)).split('\n')[0]}); it is answered without its messages, tokens and handler fields`;
    const result = buildResult(job, {}, timing);
    return { json: JSON.stringify(result), result };
  }
}
