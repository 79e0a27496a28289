"""A batch's rollout metrics as one flat dict of scalars, for the tracker the trainer already has.

veRL logs a step with ``Tracking.log(data=metrics, step=global_steps)`` (verl/utils/tracking.py),
every key a ``section/name`` path (``critic/score/mean``, ``response_length/mean``, ``timing_s/gen``);
NeMo RL with ``Logger.log_metrics(metrics, step, prefix=...)`` (nemo_rl/utils/logger.py), which
writes ``prefix/name``. ``rollout_metrics`` gives the same names to both:

    metrics.update(rollout_metrics(batch))                                   # veRL: rollout/reward/mean, ...
    logger.log_metrics(rollout_metrics(batch, prefix=""), step, prefix="rollout")   # NeMo RL: the same names

Keys (under the prefix): ``reward/{mean,batch_mean,max,min}``, ``shaped_reward/mean``,
``groups/{submitted,finished,accepted,filtered,dropped_error,cancelled,carried_over,in_batch}``,
``groups/{informative_share,filtered_share,informative_per_s}``, ``staleness/{mean,max}``,
``waste/fraction``, ``tokens/{generated,used,wasted,filtered,per_s}``,
``response_length/{mean,max,min}`` (model-generated ids per rollout), ``prompt_length/mean``,
``num_turns/mean``, ``truncated/share``, ``errors``, ``timing_s/{step,queued,init,run,eval}`` (the
step window, and the mean seconds per stage of the rollouts that ended in it),
``worker_utilization``, ``policy_version``, and with prompt selection ``selection/skipped``.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Union

from .batch import TRUNCATED_FINISH_REASONS, Batch


def _num(stats: Mapping[str, Any], key: str) -> float:
    v = stats.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def _stats3(name: str, xs: List[float]) -> Dict[str, float]:
    if not xs:
        return {f"{name}/mean": 0.0, f"{name}/max": 0.0, f"{name}/min": 0.0}
    return {f"{name}/mean": sum(xs) / len(xs), f"{name}/max": float(max(xs)), f"{name}/min": float(min(xs))}


def rollout_metrics(batch: Union[Batch, Mapping[str, Any]], prefix: str = "rollout/") -> Dict[str, float]:
    """The batch's metrics as ``{prefix + name: float}`` (names in the module docstring)."""
    b = batch if isinstance(batch, Batch) else Batch.from_dict(dict(batch))
    s = b.stats
    rollouts = b.rollouts
    finished = _num(s, "accepted") + _num(s, "filtered") + _num(s, "dropped_error")
    generated = _num(s, "tokens_generated")
    wall = _num(s, "wall_s")
    lengths = [float(sum(r.tokens.response_mask)) for r in rollouts]
    m: Dict[str, float] = {
        "reward/mean": _num(s, "mean_reward"),
        "reward/batch_mean": _num(s, "batch_mean_reward"),
        "reward/max": float(max((r.reward for r in rollouts), default=0.0)),
        "reward/min": float(min((r.reward for r in rollouts), default=0.0)),
        "shaped_reward/mean": sum(r.shaped_reward for r in rollouts) / len(rollouts) if rollouts else 0.0,
        "groups/submitted": _num(s, "submitted"),
        "groups/finished": finished,
        "groups/accepted": _num(s, "accepted"),
        "groups/filtered": _num(s, "filtered"),
        "groups/dropped_error": _num(s, "dropped_error"),
        "groups/cancelled": _num(s, "cancelled"),
        "groups/carried_over": _num(s, "carried_over"),
        "groups/in_batch": float(len(b.groups)),
        "groups/informative_share": _num(s, "accepted") / finished if finished else 0.0,
        "groups/filtered_share": _num(s, "filtered") / finished if finished else 0.0,
        "groups/informative_per_s": _num(s, "informative_groups_per_s"),
        "staleness/mean": _num(s, "staleness_mean"),
        "staleness/max": _num(s, "staleness_max"),
        "waste/fraction": _num(s, "tokens_wasted") / generated if generated else 0.0,
        "tokens/generated": generated,
        "tokens/used": _num(s, "tokens_used"),
        "tokens/wasted": _num(s, "tokens_wasted"),
        "tokens/filtered": _num(s, "tokens_filtered"),
        "tokens/per_s": generated / wall if wall else 0.0,
        **_stats3("response_length", lengths),
        "prompt_length/mean": sum(len(r.tokens.prompt_ids) for r in rollouts) / len(rollouts) if rollouts else 0.0,
        "num_turns/mean": sum(r.num_turns for r in rollouts) / len(rollouts) if rollouts else 0.0,
        "truncated/share": sum(1 for r in rollouts if r.finish_reason in TRUNCATED_FINISH_REASONS) / len(rollouts) if rollouts else 0.0,
        "errors": _num(s, "errors"),
        "timing_s/step": wall,
        "timing_s/queued": _num(s, "queued_s_mean"),
        "timing_s/init": _num(s, "init_s_mean"),
        "timing_s/run": _num(s, "run_s_mean"),
        "timing_s/eval": _num(s, "eval_s_mean"),
        "worker_utilization": _num(s, "worker_utilization"),
        "policy_version": float(b.policy_version),
    }
    if "skipped" in s:
        m["selection/skipped"] = _num(s, "skipped")
    return {f"{prefix}{k}": v for k, v in m.items()}
