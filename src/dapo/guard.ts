import type { TrainConfig } from '../protocol/config-train.js';
import { RaasError } from '../protocol/errors.js';
import type { StepWindow } from './window.js';

/**
 * veRL's DAPO recipe stops a step after `max_num_gen_batches` generation batches of
 * `gen_batch_size` prompts (its scripts: 10 batches of 3 × train_batch_size; verl@246cac4c
 * recipe/dapo/dapo_ray_trainer.py:270-284), NeMo RL after `dynamic_sampling_max_gen_batches` (10;
 * RL@7ea279ab nemo_rl/algorithms/grpo.py:284-286, 1796-1811). raas counts groups: 30 × batch_size.
 */
export const DEFAULT_GROUPS_PER_BATCH = 30;

/** The step's limit of finished groups (0: none). */
export function groupLimit(cfg: Pick<TrainConfig, 'max_groups_per_step' | 'batch_size'>): number {
  return cfg.max_groups_per_step ?? DEFAULT_GROUPS_PER_BATCH * cfg.batch_size;
}

/** Groups whose rollouts all ended in the window: accepted, filtered or dropped on an error. */
function finishedIn(w: StepWindow): number {
  return w.accepted + w.filtered + w.droppedError;
}

/** "rewards all 0 in 300 groups, all 1 in 18": what the uniform groups of the window were uniform at. */
function uniformValues(w: StepWindow): string {
  const parts = [...w.uniformAt.entries()]
    .sort((a, b) => b[1] - a[1])
    .map(([v, c], i) => `${i === 0 ? 'rewards all ' : 'all '}${fmt(v)} in ${c} group${c === 1 ? '' : 's'}`);
  return parts.length ? parts.join(', ') : 'none uniform';
}

const fmt = (v: number): string => (Number.isInteger(v) ? String(v) : v.toPrecision(3));

/** What the window saw, for the warning and the error. */
function seen(w: StepWindow, cfg: TrainConfig): string {
  const skipped = w.skipped ? `, skipped by selection ${w.skipped}` : '';
  return `submitted ${w.submitted}, accepted ${w.accepted} of batch_size=${cfg.batch_size}, filtered ${w.filtered} (${uniformValues(w)}), dropped on error ${w.droppedError}${skipped}`;
}

/**
 * The step guard: a warning once a third of the limit has finished without a batch, and the error
 * `no_informative_groups` at the limit, both naming the knob and what the window saw.
 */
export class StepGuard {
  private warned = -1;

  constructor(private readonly cfg: TrainConfig) {}

  /**
   * Checks the window of step `step` after a group finished (`ready`: a batch can be handed over).
   * Returns a warning to print (once per step) or the error that ends the step.
   */
  check(w: StepWindow, step: number, ready: boolean): { warning?: string; error?: RaasError } {
    const limit = groupLimit(this.cfg);
    if (limit === 0 || ready) return {};
    const finished = finishedIn(w);
    if (finished >= limit) {
      return {
        error: new RaasError(
          'no_informative_groups',
          `step ${step}: ${finished} groups finished without batch_size=${this.cfg.batch_size} informative ones (max_groups_per_step=${limit}): ${seen(w, this.cfg)}. ` +
            "Groups whose rewards are all equal teach nothing: the tasks are too hard (or too easy) for this policy, or the reward is constant (look at one rollout's reward); " +
            'raise max_groups_per_step (0: no limit) to keep trying.',
          { retryable: false },
        ),
      };
    }
    if (this.warned !== step && finished >= Math.ceil(limit / 3)) {
      this.warned = step;
      return {
        warning: `step ${step}: ${finished} groups finished and too few were informative: ${seen(w, this.cfg)}; the step ends with an error at max_groups_per_step=${limit}`,
      };
    }
    return {};
  }
}
