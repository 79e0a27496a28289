import type { RunResult } from '../types.js';
import type { Sandbox } from '../../sandbox/types.js';

/**
 * Why a graded job is marked `filter: true` (not to be trained on) although it ran: the reward it
 * got is unreliable. NeMo-Gym's five conditions (responses_api_agents/swe_agents/app.py@07d6b0d:3701-3723:
 * resolved when the agent did not submit but hit max iterations or the context window, the eval
 * timed out, the agent timed out, the agent or the eval was killed for memory), a patch that does
 * not apply, and ours: a grading run whose tamper canaries did not come out as expected, a test log
 * over its size bound. The agent's wall-clock timeout is the job's `timeout_s`: those jobs end
 * with `critical_error: "timeout"` and `filter_reason: "timeout"`.
 */
const FILTER_REASONS = [
  'resolved_at_max_iterations',
  'resolved_at_max_context',
  'eval_timeout',
  'agent_oom',
  'eval_oom',
  'patch_apply_failed',
  'grader_tampered',
  'eval_log_truncated',
] as const;
export type FilterReason = (typeof FILTER_REASONS)[number];

/**
 * Whether `reason` marks a job in this handler's config (`handlers.<name>.filter`): every reason
 * is on unless `filter` is false (all off) or `filter.<reason>` is false.
 */
export function filterEnabled(config: Record<string, unknown>, reason: FilterReason): boolean {
  const f = config.filter;
  if (f === false) return false;
  if (f && typeof f === 'object') return (f as Record<string, unknown>)[reason] !== false;
  return true;
}

/** The first enabled reason among `reasons` (undefined ones skipped), else undefined. */
export function firstFilter(config: Record<string, unknown>, ...reasons: Array<FilterReason | undefined>): FilterReason | undefined {
  return reasons.find((r): r is FilterReason => r !== undefined && filterEnabled(config, r));
}

/**
 * NeMo-Gym's first condition: a resolved trajectory that ended on a limit instead of the agent's
 * own finish (max iterations; the context window, which the response-token budget also is here).
 */
export function limitReason(run: Pick<RunResult, 'finish_reason'>, resolved: boolean): FilterReason | undefined {
  if (!resolved) return undefined;
  if (run.finish_reason === 'max_iterations') return 'resolved_at_max_iterations';
  if (run.finish_reason === 'max_model_len' || run.finish_reason === 'max_response_tokens') return 'resolved_at_max_context';
  return undefined;
}

/** The agent's sandbox lost processes to its memory limit during RUN (counted by RUN into artifacts.agent_oom_kills). */
export function agentOomReason(run: Pick<RunResult, 'artifacts'>): FilterReason | undefined {
  const n = run.artifacts.agent_oom_kills;
  return typeof n === 'number' && n > 0 ? 'agent_oom' : undefined;
}

/**
 * The processes of a sandbox the kernel killed for its memory limit so far, from its cgroup's
 * counters (a count the sandbox's processes cannot forge); 0 without a cgroup (the rlimit fallback).
 */
export function oomKills(sb: Sandbox | undefined): number {
  const cg = (sb as { cgroup?: { report(): { memory?: { oom_kills: number } } } } | undefined)?.cgroup;
  try {
    return cg?.report().memory?.oom_kills ?? 0;
  } catch {
    return 0;
  }
}
