import type { ProcessRequest, Result } from '../protocol/process.js';
import { cancellationKind } from '../protocol/errors.js';

/**
 * A stand-in result for a job whose wait ended without one (cancelled locally because its server
 * stopped answering, or a non-retryable client error). It carries no tokens, so waste accounting
 * stays exact, and its critical_error says what happened.
 */
export function syntheticResult(req: ProcessRequest, err: unknown): Result {
  const kind = cancellationKind(err);
  const critical = kind === 'cancelled' ? 'cancelled' : kind === 'timeout' ? 'timeout' : 'run';
  const inst = req.instance as Record<string, unknown>;
  return {
    instance_id: (inst.instance_id as string | number | undefined) ?? null,
    trajectory_id: (inst.trajectory_id as string | number | undefined) ?? null,
    git_patch: null,
    success: false,
    finish: false,
    messages: [],
    tools: [],
    end_properly: false,
    resolved: false,
    critical_error: critical,
    filter: false,
    error: err instanceof Error ? err.message : String(err),
    job_id: req.job_id ?? '',
    data_source: String(inst.data_source ?? inst.task ?? ''),
    reward: 0,
    finish_reason: critical === 'cancelled' ? 'cancelled' : critical === 'timeout' ? 'timeout' : 'error',
    backend: null,
    policy_version: req.policy_version ?? null,
    weight_versions: [],
    num_turns: 0,
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
    tokens: { prompt_ids: [], response_ids: [], response_mask: [], logprobs: [] },
  };
}
