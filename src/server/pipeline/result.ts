import type { FinishReason, Message, Result, Tokens } from '../../protocol/process.js';
import type { RunResult } from '../handlers/types.js';
import type { Job } from './job.js';

/** Empty training view. */
export function emptyTokens(): Tokens {
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
 * timing, backend). `input_ids` stay only when the client asked for them.
 */
export function buildResult(job: Job, parts: { eval?: { reward: number; resolved: boolean; details?: Record<string, unknown> } }, timing: Result['timing']): Result {
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
    messages: [],
    tools: [],
    end_properly: false,
    resolved: false,
    critical_error: null,
    filter: false,
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
    tokens: emptyTokens(),
  };
  if (run) {
    r.messages = run.messages;
    r.tokens = run.tokens;
    r.finish_reason = run.finish_reason;
    r.num_turns = run.num_turns ?? run.messages.filter((m) => m.role === 'assistant').length;
    if (run.tools) r.tools = run.tools;
  }
  if (parts.eval) {
    r.reward = parts.eval.reward;
    r.resolved = parts.eval.resolved;
    if (parts.eval.details) r.details = parts.eval.details;
  }
  r.critical_error = job.criticalError;
  r.error = job.errorMessage;
  for (const p of job.patches) r = { ...r, ...p };
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
  r.success = r.critical_error === null;
  r.finish = r.finish_reason === 'finish';
  r.end_properly = r.critical_error === null && PROPER.has(r.finish_reason);
  r.timing = timing;
  const sp = job.request.sampling_params;
  if (!(sp.token_level_generation === true || sp.return_message_ids === true)) r.messages = r.messages.map(stripInputIds);
  return r;
}

function stripInputIds(m: Message): Message {
  if (m.input_ids === undefined) return m;
  const { input_ids: _drop, ...rest } = m;
  return rest;
}
