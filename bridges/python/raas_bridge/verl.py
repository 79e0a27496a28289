"""Batch → veRL: the arrays its agent loop hands to ``DataProto`` (no veRL or torch import here)."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

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
    rows: Dict[str, List[Any]] = {k: [] for k in VERL_TENSOR_KEYS}
    uid: List[str] = []
    turns: List[int] = []
    for group in batch.groups:
        for r in group.rollouts:
            t = r.tokens
            if truncation == "error" and (len(t.prompt_ids) > P or len(t.response_ids) > R):
                raise RaasError(
                    "bad_request",
                    f"to_verl: rollout {r.job_id} has {len(t.prompt_ids)} prompt and {len(t.response_ids)} response ids, "
                    f"over max_prompt_len={P} / max_response_len={R}; raise them or pass truncation='cut'",
                )
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
            uid.append(group.group_id)
            turns.append(r.num_turns)
    out: Dict[str, Any] = {}
    for k in VERL_TENSOR_KEYS:
        out[k] = matrix(rows[k], "float32" if k in ("rollout_log_probs", "rm_scores") else "int64")
        if tensor is not None:
            out[k] = tensor(out[k])
    out["uid"] = vector(uid, "object")
    out["__num_turns__"] = vector(turns, "int32")
    return out


def split_verl(arrays: Dict[str, Any]) -> "tuple[Dict[str, Any], Dict[str, Any]]":
    """Splits to_verl's dict into (tensors, non_tensors), the two arguments of ``DataProto.from_dict``."""
    tensors = {k: v for k, v in arrays.items() if k not in VERL_NON_TENSOR_KEYS}
    non_tensors = {k: v for k, v in arrays.items() if k in VERL_NON_TENSOR_KEYS}
    return tensors, non_tensors
