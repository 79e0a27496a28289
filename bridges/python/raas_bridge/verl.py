"""Batch → veRL: the arrays its agent loop hands to ``DataProto`` (no veRL or torch import here)."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from . import _arrays
from ._arrays import matrix, vector
from .batch import Batch
from .errors import RaasError

#: Keys of the tensor part, in veRL's names (``verl.experimental.agent_loop``'s ``_postprocess``).
VERL_TENSOR_KEYS = (
    "prompts", "responses", "response_mask", "input_ids", "attention_mask", "position_ids", "rollout_log_probs", "rm_scores",
)
#: Keys of the non-tensor part: ``uid`` groups rollouts for GRPO/DAPO advantages.
VERL_NON_TENSOR_KEYS = ("uid", "__num_turns__")


def to_verl(batch: Batch, max_prompt_len: int, max_response_len: int, pad_id: int, *, truncation: str = "cut",
            tensor: Optional[Callable[[Any], Any]] = None) -> Dict[str, Any]:
    """The dict of arrays veRL's ``DataProto.from_dict`` takes after its agent loop, one row per rollout.

    - ``prompts`` [N, max_prompt_len]: left-padded with ``pad_id``;
    - ``responses`` [N, max_response_len]: right-padded with ``pad_id``;
    - ``response_mask`` [N, R]: 1 on model-generated ids, 0 on observations and padding;
    - ``input_ids`` / ``attention_mask`` / ``position_ids`` [N, P+R]: prompt then response, 1 on real
      ids, positions ``cumsum(attention_mask) - 1`` clipped at 0 (veRL's ``compute_position_id_with_mask``);
    - ``rollout_log_probs`` [N, R] (float32): the backend's logprobs, 0 on observations and padding;
    - ``rm_scores`` [N, R] (float32): the rollout's ``shaped_reward`` at its last model-generated id;
    - ``uid`` [N] (object): the group id, which veRL's GRPO advantage groups by; ``__num_turns__`` [N].

    Too-long sequences: ``truncation="cut"`` keeps the end of the prompt (where the generation prompt
    sits) and the start of the response; ``"error"`` raises RaasError ``bad_request`` instead.
    Arrays are numpy (int64 / float32) when numpy is importable, else lists of lists; ``tensor``
    (e.g. ``torch.as_tensor``) is applied to each tensor-part array.
    """
    if max_prompt_len <= 0 or max_response_len <= 0:
        raise RaasError("bad_request", "to_verl: max_prompt_len and max_response_len must be positive")
    if truncation not in ("cut", "error"):
        raise RaasError("bad_request", f'to_verl: truncation must be "cut" or "error", got {truncation!r}')
    P, R = max_prompt_len, max_response_len
    for group in batch.groups:
        for r in group.rollouts:
            t = r.tokens
            if truncation == "error" and (len(t.prompt_ids) > P or len(t.response_ids) > R):
                raise RaasError(
                    "bad_request",
                    f"to_verl: rollout {r.job_id} has {len(t.prompt_ids)} prompt and {len(t.response_ids)} response ids, "
                    f"over max_prompt_len={P} / max_response_len={R}; raise them or pass truncation='cut'",
                )
    out = _with_numpy(batch, P, R, pad_id) if _arrays.np is not None else _with_lists(batch, P, R, pad_id)
    if tensor is not None:
        for k in VERL_TENSOR_KEYS:
            out[k] = tensor(out[k])
    out["uid"] = vector([g.group_id for g in batch.groups for _ in g.rollouts], "object")
    out["__num_turns__"] = vector([r.num_turns for r in batch.rollouts], "int32")
    return out


def _with_lists(batch: Batch, P: int, R: int, pad_id: int) -> Dict[str, Any]:
    """The tensor part as lists of lists (no numpy)."""
    rows: Dict[str, List[Any]] = {k: [] for k in VERL_TENSOR_KEYS}
    for r in batch.rollouts:
        t = r.tokens
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
            last = max((i for i, m in enumerate(mask) if m), default=len(resp) - 1)
            scores[last] = float(r.shaped_reward)
        rows["prompts"].append([pad_id] * lp + prompt)
        rows["responses"].append(resp + [pad_id] * lr)
        rows["response_mask"].append(mask + [0] * lr)
        rows["input_ids"].append(rows["prompts"][-1] + rows["responses"][-1])
        rows["attention_mask"].append(attn)
        rows["position_ids"].append(pos)
        rows["rollout_log_probs"].append(lps + [0.0] * lr)
        rows["rm_scores"].append(scores)
    return {k: matrix(rows[k], "float32" if k in ("rollout_log_probs", "rm_scores") else "int64") for k in VERL_TENSOR_KEYS}


def _with_numpy(batch: Batch, P: int, R: int, pad_id: int) -> Dict[str, Any]:
    """The same arrays filled by slices (a batch holds millions of ids; per-id Python loops are slow)."""
    np = _arrays.np
    rollouts = batch.rollouts
    N = len(rollouts)
    prompts = np.full((N, P), pad_id, dtype=np.int64)
    responses = np.full((N, R), pad_id, dtype=np.int64)
    mask = np.zeros((N, R), dtype=np.int64)
    attn = np.zeros((N, P + R), dtype=np.int64)
    lps = np.zeros((N, R), dtype=np.float32)
    scores = np.zeros((N, R), dtype=np.float32)
    for i, r in enumerate(rollouts):
        t = r.tokens
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
