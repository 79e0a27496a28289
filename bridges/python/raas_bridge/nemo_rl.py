"""Batch → NeMo RL: its message-log form, with token ids cut from the ``tokens`` view by spans."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from ._arrays import vector
from .batch import Batch, Message, Tokens
from .errors import RaasError


def _segments(t: Tokens) -> List[Tuple[int, int, Optional[int]]]:
    """``(start, end, message_index)`` ranges of response_ids, one per message after the prompt.

    From ``tokens.spans`` when present; otherwise from runs of equal ``response_mask`` values
    (a run of 1s is an assistant turn, a run of 0s an observation)."""
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


def _prompt_message(t: Tokens, messages: Optional[List[Message]], first_index: Optional[int]) -> Dict[str, Any]:
    # The batch keeps the prompt as one id block, so the prompt becomes one message; its text joins
    # the prompt messages' contents when the rollout carries messages.
    msgs = messages or []
    before = msgs[:first_index] if first_index is not None else []
    role = before[-1].role if len(before) == 1 else "user"
    content = "\n".join(m.content for m in before)
    return {"role": role, "content": content, "token_ids": vector(t.prompt_ids, "int64")}


def to_nemo_rl(batch: Batch, *, tensor: Optional[Callable[[Any], Any]] = None,
               expect_logprobs_mode: Optional[str] = None, segments: str = "main") -> Dict[str, Any]:
    """NeMo RL's ``BatchedDataDict`` content after a rollout, one row per rollout (group by group),
    or with ``segments="all"`` one row per sequence of a rollout that has several, each with the
    rollout's rewards and group (docs/python.md, "Rollouts of several sequences").

    - ``message_log``: per rollout, the prompt as one message (``token_ids`` = ``prompt_ids``), then
      one message per span, each with ``token_ids``; assistant messages carry
      ``generation_logprobs`` (the behaviour policy's per-token logprobs), so NeMo RL's
      ``add_grpo_token_loss_masks_and_generation_logprobs`` puts exactly the generated ids in the loss;
    - ``length``: the prompt length, which NeMo RL reads to cut the initial prompt out of the log
      (``extract_initial_prompt_messages``) and so to group rollouts for the per-prompt baseline;
    - ``total_reward`` (shaped) and ``unshaped_total_reward`` (the task reward before shaping:
      dynamic sampling's std reads it), ``truncated`` (a length limit ended the rollout: overlong
      filtering zeroes its ``loss_multiplier``), ``loss_multiplier`` (1.0);
    - ``group_ids``, ``task_name`` (lists), ``idx`` (group index in the batch), ``policy_version``
      and ``staleness``.

    Numeric arrays go through ``tensor`` (pass ``torch.as_tensor``: ``BatchedDataDict.select_indices``
    takes tensors and lists only); without it they are numpy arrays (lists without numpy).
    ``expect_logprobs_mode`` raises RaasError ``logprobs_mode_mismatch`` when the batch recorded
    another mode.
    """
    batch.check_logprobs_mode(expect_logprobs_mode, "to_nemo_rl")
    conv: Callable[[Any], Any] = tensor if tensor is not None else (lambda x: x)
    message_log: List[List[Dict[str, Any]]] = []
    cols: Dict[str, List[Any]] = {k: [] for k in (
        "total_reward", "unshaped_total_reward", "truncated", "group_ids", "idx", "task_name", "length", "policy_version", "staleness")}
    index = {id(g): gi for gi, g in enumerate(batch.groups)}
    for w in batch.rows(segments):
        group, r, t, gi = w.group, w.rollout, w.tokens, index[id(w.group)]
        # Messages describe the main sequence (``tokens``); a segment's ids stand alone.
        messages = r.messages if t is r.tokens else None
        message_log.append(_message_log(t, messages, r.job_id, conv))
        cols["total_reward"].append(r.shaped_reward)
        cols["unshaped_total_reward"].append(r.reward)
        cols["truncated"].append(r.truncated)
        cols["group_ids"].append(group.group_id)
        cols["idx"].append(gi)
        cols["task_name"].append(group.data_source)
        cols["length"].append(len(t.prompt_ids))
        cols["policy_version"].append(r.policy_version)
        cols["staleness"].append(r.staleness)
    n = len(message_log)
    return {
        "message_log": message_log,
        "total_reward": conv(vector(cols["total_reward"], "float32")),
        "unshaped_total_reward": conv(vector(cols["unshaped_total_reward"], "float32")),
        "truncated": conv(vector(cols["truncated"], "bool")),
        "loss_multiplier": conv(vector([1.0] * n, "float32")),
        "length": conv(vector(cols["length"], "int64")),
        "idx": conv(vector(cols["idx"], "int64")),
        "policy_version": conv(vector(cols["policy_version"], "int64")),
        "staleness": conv(vector(cols["staleness"], "int64")),
        # select_indices takes tensors and lists, not numpy object arrays
        "group_ids": list(cols["group_ids"]),
        "task_name": list(cols["task_name"]),
    }


def _message_log(t: Tokens, messages: Optional[List[Message]], job_id: str, conv: Callable[[Any], Any]) -> List[Dict[str, Any]]:
    first = min((s.message_index for s in t.spans), default=None) if t.spans else None
    log = [_prompt_message(t, messages, first)]
    log[0]["token_ids"] = conv(log[0]["token_ids"])
    for start, end, mi in _segments(t):
        mask = t.response_mask[start:end]
        msg = messages[mi] if (messages is not None and mi is not None and mi < len(messages)) else None
        role = msg.role if msg is not None else ("assistant" if mask and all(mask) else "tool")
        if role == "assistant" and not all(mask):
            raise RaasError("bad_batch", f"rollout {job_id}: assistant span [{start}, {end}) has observation ids (mask 0)")
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
    return log
