"""Batch → veRL: the arrays its agent loop hands to ``DataProto`` (no veRL or torch import here)."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from . import _arrays
from ._arrays import matrix, vector
from .batch import Batch, Row
from .errors import RaasError

#: Keys of the tensor part, in veRL's names (``verl.experimental.agent_loop``'s ``_postprocess``).
VERL_TENSOR_KEYS = (
    "prompts", "responses", "response_mask", "input_ids", "attention_mask", "position_ids", "rollout_log_probs", "rm_scores",
)
#: Per-row metrics a reward manager reports (``reward_extra_keys``): DAPO's ``filter_groups`` reads one.
VERL_REWARD_EXTRA_KEYS = ("acc", "score")
#: Keys of the non-tensor part: ``uid`` groups rollouts for GRPO/DAPO advantages.
VERL_NON_TENSOR_KEYS = (
    "uid", "__num_turns__", "multi_modal_inputs", "data_source", *VERL_REWARD_EXTRA_KEYS, "policy_version", "staleness",
    "rollout_id", "segment_index",
)
TRUNCATIONS = ("error", "left")


def to_verl(batch: Batch, max_prompt_len: int, max_response_len: int, pad_id: int, *, truncation: str = "error",
            tensor: Optional[Callable[[Any], Any]] = None, expect_logprobs_mode: Optional[str] = None,
            segments: str = "main") -> Dict[str, Any]:
    """The dict of arrays veRL's ``DataProto.from_dict`` takes after its agent loop, one row per
    rollout (``segments="main"``), or with ``segments="all"`` one row per sequence of a rollout
    that has several (an agent harness behind the gateway), each with the rollout's reward and the
    group's ``uid``; ``rollout_id`` and ``segment_index`` say which rollout and sequence a row is
    (docs/python.md, "Rollouts of several sequences").

    Tensor part (int64 ids, float32 scores):

    - ``prompts`` [N, P] left-padded, ``responses`` [N, R] right-padded with ``pad_id``;
    - ``response_mask`` [N, R]: 1 on model-generated ids, 0 on observations and padding;
    - ``input_ids`` / ``attention_mask`` / ``position_ids`` [N, P+R] (``compute_position_id_with_mask``);
    - ``rollout_log_probs`` [N, R]: the backend's logprobs (the behaviour policy), 0 elsewhere;
    - ``rm_scores`` [N, R]: the rollout's ``shaped_reward`` at its last model-generated id.

    Non-tensor part: ``uid`` (group id), ``__num_turns__`` (veRL's count: model turns +
    observation blocks + 1), ``multi_modal_inputs`` (empty dicts: text only), ``data_source``,
    ``acc`` and ``score`` (the task reward before shaping: DAPO's ``filter_groups`` metric),
    ``policy_version`` and ``staleness``.

    A sequence longer than ``max_prompt_len`` / ``max_response_len`` raises RaasError
    ``bad_request`` (``truncation="error"``, the default: veRL's agent loop never cuts a prompt, and
    a cut prompt is a context the logprobs were not sampled from). ``truncation="left"`` drops the
    prompt's start and the response's end instead, and records a warning in ``batch.stats``.
    ``expect_logprobs_mode`` (e.g. ``"processed_logprobs"``, veRL's own vLLM setting) raises
    RaasError ``logprobs_mode_mismatch`` when the batch recorded another mode. ``tensor`` (e.g.
    ``torch.as_tensor``) is applied to each tensor-part array; without numpy, arrays are lists.
    """
    if max_prompt_len <= 0 or max_response_len <= 0:
        raise RaasError("bad_request", "to_verl: max_prompt_len and max_response_len must be positive")
    if truncation == "cut":  # the name before "left"
        truncation = "left"
    if truncation not in TRUNCATIONS:
        raise RaasError("bad_request", f'to_verl: truncation must be "error" or "left", got {truncation!r}')
    batch.check_logprobs_mode(expect_logprobs_mode, "to_verl")
    P, R = max_prompt_len, max_response_len
    rows = batch.rows(segments)
    _check_lengths(rows, P, R, truncation, batch)
    out = _with_numpy(rows, P, R, pad_id) if _arrays.np is not None else _with_lists(rows, P, R, pad_id)
    if tensor is not None:
        for k in VERL_TENSOR_KEYS:
            out[k] = tensor(out[k])
    out["uid"] = vector([w.group.group_id for w in rows], "object")
    out["__num_turns__"] = vector([num_turns(w) for w in rows], "int32")
    out["multi_modal_inputs"] = vector([{} for _ in rows], "object")
    out["data_source"] = vector([w.group.data_source for w in rows], "object")
    for k in VERL_REWARD_EXTRA_KEYS:
        out[k] = vector([w.rollout.reward for w in rows], "float64")
    out["policy_version"] = vector([w.rollout.policy_version for w in rows], "int64")
    out["staleness"] = vector([w.rollout.staleness for w in rows], "int64")
    out["rollout_id"] = vector([w.rollout.job_id for w in rows], "object")
    out["segment_index"] = vector([w.segment_index for w in rows], "int64")
    return out


def verl_meta_info(batch: Batch, temperature: float) -> Dict[str, Any]:
    """``DataProto.meta_info`` for a batch: ``temperature`` (the sampling temperature raas used; veRL's
    actor divides its logits by it when it recomputes logprobs), ``global_steps``,
    ``reward_extra_keys`` and the batch's ``logprobs_mode`` and ``policy_version``."""
    return {
        "temperature": float(temperature),
        "global_steps": batch.step,
        "reward_extra_keys": list(VERL_REWARD_EXTRA_KEYS),
        "logprobs_mode": batch.logprobs_mode,
        "policy_version": batch.policy_version,
    }


def num_turns(w: Row) -> int:
    """veRL's ``__num_turns__``: assistant turns + user turns (one per observation block) + 1 (the prompt)."""
    mask = w.tokens.response_mask
    blocks = sum(1 for i, m in enumerate(mask) if m == 0 and (i == 0 or mask[i - 1] == 1))
    turns = w.rollout.num_turns if not w.rollout.segments else w.rollout.segments[w.segment_index].num_turns
    return turns + blocks + 1


def _check_lengths(rows: List[Row], P: int, R: int, truncation: str, batch: Batch) -> None:
    long_prompts: List[Tuple[str, int]] = []
    long_responses: List[Tuple[str, int]] = []
    for w in rows:
        t = w.tokens
        if len(t.prompt_ids) > P:
            long_prompts.append((w.rollout.job_id, len(t.prompt_ids)))
        if len(t.response_ids) > R:
            long_responses.append((w.rollout.job_id, len(t.response_ids)))
    if not long_prompts and not long_responses:
        return
    if truncation == "error":
        job, n = (long_prompts or long_responses)[0]
        what, limit = ("prompt", f"max_prompt_len={P}") if long_prompts else ("response", f"max_response_len={R}")
        raise RaasError(
            "bad_request",
            f"to_verl: rollout {job} has {n} {what} ids, over {limit} ({len(long_prompts)} prompts and "
            f"{len(long_responses)} responses too long); raise data.max_prompt_length / data.max_response_length "
            f"(or cap raas's max_response_tokens), or pass truncation='left' to cut them",
        )
    if long_prompts:
        batch.stats["truncated_prompts"] = len(long_prompts)
        batch.warn(f"to_verl: truncation='left' cut the start of {len(long_prompts)} prompts to {P} ids "
                   f"(first: {long_prompts[0][0]}, {long_prompts[0][1]} ids); their logprobs were sampled from the whole prompt")
    if long_responses:
        batch.stats["truncated_responses"] = len(long_responses)
        batch.warn(f"to_verl: truncation='left' cut the end of {len(long_responses)} responses to {R} ids "
                   f"(first: {long_responses[0][0]}, {long_responses[0][1]} ids)")


def _with_lists(seqs: List[Row], P: int, R: int, pad_id: int) -> Dict[str, Any]:
    """The tensor part as lists of lists (no numpy)."""
    rows: Dict[str, List[Any]] = {k: [] for k in VERL_TENSOR_KEYS}
    for w in seqs:
        t, r = w.tokens, w.rollout
        prompt = t.prompt_ids[-P:]
        resp = t.response_ids[:R]
        mask = [int(m) for m in t.response_mask[:R]]
        lps = [float(x) if m else 0.0 for x, m in zip(t.logprobs[:R], mask)]
        lp, lr = P - len(prompt), R - len(resp)
        attn = [0] * lp + [1] * len(prompt) + [1] * len(resp) + [0] * lr
        pos, seen = [], 0
        for a in attn:
            seen += a
            pos.append(max(seen - 1, 0))
        scores = [0.0] * R
        if resp:
            scores[_reward_index(mask)] = float(r.shaped_reward)
        rows["prompts"].append([pad_id] * lp + prompt)
        rows["responses"].append(resp + [pad_id] * lr)
        rows["response_mask"].append(mask + [0] * lr)
        rows["input_ids"].append(rows["prompts"][-1] + rows["responses"][-1])
        rows["attention_mask"].append(attn)
        rows["position_ids"].append(pos)
        rows["rollout_log_probs"].append(lps + [0.0] * lr)
        rows["rm_scores"].append(scores)
    return {k: matrix(rows[k], "float32" if k in ("rollout_log_probs", "rm_scores") else "int64") for k in VERL_TENSOR_KEYS}


def _reward_index(mask: List[int]) -> int:
    # The last model-generated id, not veRL agent loop's last valid id: when a rollout ends with an
    # observation, a reward there is skipped by veRL's GAE and REINFORCE++ (they ignore masked ids).
    return max((i for i, m in enumerate(mask) if m), default=len(mask) - 1)


def _with_numpy(rows: List[Row], P: int, R: int, pad_id: int) -> Dict[str, Any]:
    """The same arrays filled by slices (a batch holds millions of ids; per-id Python loops are slow)."""
    np = _arrays.np
    N = len(rows)
    prompts = np.full((N, P), pad_id, dtype=np.int64)
    responses = np.full((N, R), pad_id, dtype=np.int64)
    mask = np.zeros((N, R), dtype=np.int64)
    attn = np.zeros((N, P + R), dtype=np.int64)
    lps = np.zeros((N, R), dtype=np.float32)
    scores = np.zeros((N, R), dtype=np.float32)
    for i, w in enumerate(rows):
        t, r = w.tokens, w.rollout
        p = t.prompt_ids[-P:]
        n = min(len(t.response_ids), R)
        if p:
            prompts[i, P - len(p):] = p
            attn[i, P - len(p):P] = 1
        if n:
            responses[i, :n] = t.response_ids[:n]
            attn[i, P:P + n] = 1
            m = np.asarray(t.response_mask[:n], dtype=np.int64)
            mask[i, :n] = m
            lps[i, :n] = np.where(m == 1, np.asarray(t.logprobs[:n], dtype=np.float32), 0.0)
            gen = np.flatnonzero(m)
            scores[i, int(gen[-1]) if len(gen) else n - 1] = r.shaped_reward
    return {
        "prompts": prompts,
        "responses": responses,
        "response_mask": mask,
        "input_ids": np.concatenate([prompts, responses], axis=1),
        "attention_mask": attn,
        "position_ids": np.clip(np.cumsum(attn, axis=1) - 1, 0, None),
        "rollout_log_probs": lps,
        "rm_scores": scores,
    }


def split_verl(arrays: Dict[str, Any]) -> "tuple[Dict[str, Any], Dict[str, Any]]":
    """Splits to_verl's dict into (tensors, non_tensors), the two arguments of ``DataProto.from_dict``."""
    tensors = {k: v for k, v in arrays.items() if k not in VERL_NON_TENSOR_KEYS}
    non_tensors = {k: v for k, v in arrays.items() if k in VERL_NON_TENSOR_KEYS}
    return tensors, non_tensors
