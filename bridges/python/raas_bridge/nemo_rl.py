"""Batch → NeMo RL: its message-log form, with token ids cut from the ``tokens`` view by spans."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from ._arrays import vector
from .batch import Batch, Rollout
from .errors import RaasError


def _segments(r: Rollout) -> List[Tuple[int, int, Optional[int]]]:
    """``(start, end, message_index)`` ranges of response_ids, one per message after the prompt.

    From ``tokens.spans`` when present; otherwise from runs of equal ``response_mask`` values
    (a run of 1s is an assistant turn, a run of 0s an observation)."""
    t = r.tokens
    if t.spans:
        # Ids no span covers (there should be none) still become messages, so the log's ids always
        # concatenate to prompt_ids + response_ids.
        out: List[Tuple[int, int, Optional[int]]] = []
        at = 0
        for s in sorted(t.spans, key=lambda s: s.start):
            if s.start > at:
                out.extend(_runs(t.response_mask, at, s.start))
            if s.end > max(at, s.start) or s.start == s.end:
                out.append((max(at, s.start), s.end, s.message_index))
            at = max(at, s.end)
        if at < len(t.response_ids):
            out.extend(_runs(t.response_mask, at, len(t.response_ids)))
        return out
    return _runs(t.response_mask, 0, len(t.response_mask))


def _runs(mask: List[int], lo: int, hi: int) -> List[Tuple[int, int, Optional[int]]]:
    """Runs of equal mask values in ``mask[lo:hi]``."""
    segs: List[Tuple[int, int, Optional[int]]] = []
    start = lo
    for i in range(lo + 1, hi + 1):
        if i == hi or mask[i] != mask[start]:
            segs.append((start, i, None))
            start = i
    return segs


def _prompt_message(r: Rollout, first_index: Optional[int]) -> Dict[str, Any]:
    # The batch keeps the prompt as one id block, so the prompt becomes one message; its text joins
    # the prompt messages' contents when the rollout carries messages.
    msgs = r.messages or []
    before = msgs[:first_index] if first_index is not None else []
    role = before[-1].role if len(before) == 1 else "user"
    content = "\n".join(m.content for m in before)
    return {"role": role, "content": content, "token_ids": vector(r.tokens.prompt_ids, "int64")}


def to_nemo_rl(batch: Batch, *, tensor: Optional[Callable[[Any], Any]] = None) -> Dict[str, Any]:
    """NeMo RL's message-log form, one entry per rollout (group by group).

    Returns ``message_log`` (per rollout: a prompt message, then one message per span, each with
    ``token_ids``; assistant messages also carry ``generation_logprobs``), ``rewards`` (shaped; also under NeMo RL's key ``total_reward``),
    ``task_rewards`` (before shaping), ``advantages``, ``group_ids``, ``idx`` (group index within the
    batch), ``task_name`` (data_source), ``length`` (total ids) and ``loss_multiplier`` (1.0).
    Arrays are numpy when importable, else lists; ``tensor`` (e.g. ``torch.as_tensor``) is applied
    to every numeric array (token_ids, generation_logprobs, rewards, ...), as NeMo RL holds tensors.
    """
    conv: Callable[[Any], Any] = tensor if tensor is not None else (lambda x: x)
    message_log: List[List[Dict[str, Any]]] = []
    rewards: List[float] = []
    task_rewards: List[float] = []
    advantages: List[float] = []
    group_ids: List[str] = []
    idx: List[int] = []
    task_name: List[str] = []
    length: List[int] = []
    for gi, group in enumerate(batch.groups):
        for r in group.rollouts:
            t = r.tokens
            segs = _segments(r)
            first = min((s.message_index for s in t.spans), default=None) if t.spans else None
            log = [_prompt_message(r, first)]
            log[0]["token_ids"] = conv(log[0]["token_ids"])
            for start, end, mi in segs:
                mask = t.response_mask[start:end]
                msg = r.messages[mi] if (r.messages is not None and mi is not None and mi < len(r.messages)) else None
                role = msg.role if msg is not None else ("assistant" if mask and all(mask) else "tool")
                if role == "assistant" and not all(mask):
                    raise RaasError("bad_batch", f"rollout {r.job_id}: assistant span [{start}, {end}) has observation ids (mask 0)")
                entry: Dict[str, Any] = {
                    "role": role,
                    "content": msg.content if msg is not None else "",
                    "token_ids": conv(vector(t.response_ids[start:end], "int64")),
                }
                if role == "assistant":
                    entry["generation_logprobs"] = conv(vector(t.logprobs[start:end], "float32"))
                if msg is not None and msg.tool_calls:
                    entry["tool_calls"] = msg.tool_calls
                log.append(entry)
            message_log.append(log)
            rewards.append(r.shaped_reward)
            task_rewards.append(r.reward)
            advantages.append(r.advantage)
            group_ids.append(group.group_id)
            idx.append(gi)
            task_name.append(group.data_source)
            length.append(len(t.prompt_ids) + len(t.response_ids))
    return {
        "message_log": message_log,
        "rewards": conv(vector(rewards, "float32")),
        # NeMo RL's GRPO reads the per-sample reward under this key
        "total_reward": conv(vector(rewards, "float32")),
        "task_rewards": conv(vector(task_rewards, "float32")),
        "advantages": conv(vector(advantages, "float32")),
        "group_ids": vector(group_ids, "object"),
        "idx": conv(vector(idx, "int64")),
        "task_name": list(task_name),
        "length": conv(vector(length, "int64")),
        "loss_multiplier": conv(vector([1.0] * len(rewards), "float32")),
    }
