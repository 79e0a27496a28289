"""Typed views of the one batch schema (src/protocol/batch.ts, docs/batch-format.md)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Union

from .errors import RaasError

_ROLLOUT_KEYS = (
    "job_id", "trajectory_id", "reward", "shaped_reward", "advantage", "policy_version", "staleness",
    "weight_versions", "finish_reason", "num_turns", "tokens", "segments", "messages",
)


def _need(d: Dict[str, Any], key: str, where: str) -> Any:
    if not isinstance(d, dict) or key not in d:
        raise RaasError("bad_batch", f"{where}.{key} is missing")
    return d[key]


@dataclass
class Span:
    """Maps message ``message_index`` onto ``response_ids[start:end]``."""

    message_index: int
    start: int
    end: int


@dataclass
class Tokens:
    """The training view: ``prompt_ids + response_ids`` is the whole sequence."""

    prompt_ids: List[int]
    response_ids: List[int]
    response_mask: List[int]
    logprobs: List[float]
    spans: Optional[List[Span]] = None

    @classmethod
    def from_dict(cls, d: Dict[str, Any], where: str = "tokens") -> "Tokens":
        t = cls(
            prompt_ids=list(_need(d, "prompt_ids", where)),
            response_ids=list(_need(d, "response_ids", where)),
            response_mask=list(_need(d, "response_mask", where)),
            logprobs=list(_need(d, "logprobs", where)),
            spans=[Span(s["message_index"], s["start"], s["end"]) for s in d["spans"]] if d.get("spans") is not None else None,
        )
        n = len(t.response_ids)
        if len(t.response_mask) != n or len(t.logprobs) != n:
            raise RaasError(
                "bad_batch",
                f"{where}: response_mask ({len(t.response_mask)}) and logprobs ({len(t.logprobs)}) must match response_ids ({n})",
            )
        for s in t.spans or []:
            if not 0 <= s.start <= s.end <= n:
                raise RaasError("bad_batch", f"{where}.spans: [{s.start}, {s.end}) is outside response_ids (length {n})")
        return t


@dataclass
class Segment:
    """One sequence of a rollout that holds several (an agent harness behind raas's gateway).

    ``parent`` is ``{"segment": i, "shared": n}`` when it branched off segment ``i`` sharing its
    first ``n`` ids (those sit in this segment's ``prompt_ids``), else None."""

    index: int
    parent: Optional[Dict[str, int]]
    tokens: Tokens
    num_turns: int = 0
    weight_versions: List[str] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d: Dict[str, Any], where: str = "segment") -> "Segment":
        return cls(
            index=int(_need(d, "index", where)),
            parent=d.get("parent"),
            tokens=Tokens.from_dict(d, where),
            num_turns=int(d.get("num_turns", 0)),
            weight_versions=list(d.get("weight_versions", [])),
        )


@dataclass
class Message:
    """One message of a trajectory; ``token_ids``/``logprobs`` are on assistant messages."""

    role: str
    content: str
    token_ids: Optional[List[int]] = None
    logprobs: Optional[List[float]] = None
    tool_calls: Optional[List[Dict[str, Any]]] = None
    tool_call_id: Optional[str] = None
    input_ids: Optional[List[int]] = None

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Message":
        return cls(
            role=d["role"], content=d.get("content", ""), token_ids=d.get("token_ids"), logprobs=d.get("logprobs"),
            tool_calls=d.get("tool_calls"), tool_call_id=d.get("tool_call_id"), input_ids=d.get("input_ids"),
        )


#: Finish reasons of a rollout cut by a length limit (NeMo RL's ``truncated``, DAPO's overlong filtering).
TRUNCATED_FINISH_REASONS = ("max_response_tokens", "max_model_len")


@dataclass
class Rollout:
    """One rollout of a group, as a trainer consumes it."""

    job_id: str
    trajectory_id: Union[str, int, None]
    reward: float
    shaped_reward: float
    advantage: float
    policy_version: int
    staleness: int
    weight_versions: List[str]
    finish_reason: str
    num_turns: int
    tokens: Tokens
    messages: Optional[List[Message]] = None
    #: Every sequence of a rollout of several (None for one of one sequence, which is ``tokens``).
    segments: Optional[List[Segment]] = None
    #: Fields a newer sidecar added that this bridge does not know (kept, not dropped).
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def truncated(self) -> bool:
        """True when a length limit ended the rollout (its last turn was cut)."""
        return self.finish_reason in TRUNCATED_FINISH_REASONS

    def sequences(self) -> List[Tokens]:
        """The token sequences to train on: every segment's, or ``tokens`` alone."""
        return [s.tokens for s in self.segments] if self.segments else [self.tokens]

    @classmethod
    def from_dict(cls, d: Dict[str, Any], where: str = "rollout") -> "Rollout":
        msgs = d.get("messages")
        segs = d.get("segments")
        return cls(
            job_id=_need(d, "job_id", where),
            trajectory_id=d.get("trajectory_id"),
            reward=float(_need(d, "reward", where)),
            shaped_reward=float(_need(d, "shaped_reward", where)),
            advantage=float(_need(d, "advantage", where)),
            policy_version=int(_need(d, "policy_version", where)),
            staleness=int(d.get("staleness", 0)),
            weight_versions=list(d.get("weight_versions", [])),
            finish_reason=_need(d, "finish_reason", where),
            num_turns=int(d.get("num_turns", 0)),
            tokens=Tokens.from_dict(_need(d, "tokens", where), f"{where}.tokens"),
            messages=[Message.from_dict(m) for m in msgs] if msgs is not None else None,
            segments=[Segment.from_dict(x, f"{where}.segments[{i}]") for i, x in enumerate(segs)] if segs else None,
            extra={k: v for k, v in d.items() if k not in _ROLLOUT_KEYS},
        )


@dataclass
class Group:
    """A prompt's n rollouts: the unit of submission, acceptance and group-relative advantages."""

    group_id: str
    instance_id: Union[str, int, None]
    data_source: str
    rollouts: List[Rollout]

    @classmethod
    def from_dict(cls, d: Dict[str, Any], where: str = "group") -> "Group":
        return cls(
            group_id=_need(d, "group_id", where),
            instance_id=d.get("instance_id"),
            data_source=_need(d, "data_source", where),
            rollouts=[Rollout.from_dict(r, f"{where}.rollouts[{i}]") for i, r in enumerate(_need(d, "rollouts", where))],
        )


@dataclass
class Row:
    """One training sequence: its group, its rollout, which of the rollout's sequences, its tokens."""

    group: Group
    rollout: Rollout
    segment_index: int
    tokens: Tokens


#: vLLM's ``--logprobs-mode`` values a batch may record (``Batch.logprobs_mode``).
LOGPROBS_MODES = ("raw_logprobs", "processed_logprobs")


@dataclass
class Batch:
    """One training step's batch: ``groups`` of rollouts plus the step's ``stats``.

    ``logprobs_mode`` says which logprobs the backends returned (``raw_logprobs`` or
    ``processed_logprobs``, vLLM's ``--logprobs-mode``); None when the sidecar did not record it."""

    step: int
    policy_version: int
    groups: List[Group]
    stats: Dict[str, Any] = field(default_factory=dict)
    logprobs_mode: Optional[str] = None

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Batch":
        """Parses a batch as the sidecar answers it (raises RaasError ``bad_batch`` naming the field)."""
        mode = d.get("logprobs_mode")
        if mode is not None and mode not in LOGPROBS_MODES:
            raise RaasError("bad_batch", f"batch.logprobs_mode must be one of {', '.join(LOGPROBS_MODES)}, got {mode!r}")
        return cls(
            step=int(_need(d, "step", "batch")),
            policy_version=int(_need(d, "policy_version", "batch")),
            groups=[Group.from_dict(g, f"batch.groups[{i}]") for i, g in enumerate(_need(d, "groups", "batch"))],
            stats=dict(d.get("stats", {})),
            logprobs_mode=mode,
        )

    def warn(self, message: str) -> None:
        """Records an adapter's warning in ``stats["warnings"]`` (where a trainer logs batch stats)."""
        warnings = self.stats.setdefault("warnings", [])
        if message not in warnings:
            warnings.append(message)

    def check_logprobs_mode(self, expected: Optional[str], where: str) -> None:
        """Raises RaasError ``logprobs_mode_mismatch`` when the batch recorded another mode than
        ``expected``; records a warning when it recorded none. ``expected=None`` checks nothing."""
        if expected is None:
            return
        if expected not in LOGPROBS_MODES:
            raise RaasError("bad_request", f"{where}: expect_logprobs_mode must be one of {', '.join(LOGPROBS_MODES)}, got {expected!r}")
        if self.logprobs_mode is None:
            self.warn(f"{where}: the batch does not record its logprobs mode; the trainer expects {expected}")
        elif self.logprobs_mode != expected:
            raise RaasError(
                "logprobs_mode_mismatch",
                f"{where}: the backends returned {self.logprobs_mode} but the trainer expects {expected}; "
                f"start vLLM with --logprobs-mode {expected} (docs/python.md, logprobs mode)",
            )

    @property
    def rollouts(self) -> List[Rollout]:
        """Every rollout, group by group (the row order of the adapters)."""
        return [r for g in self.groups for r in g.rollouts]

    def rows(self, segments: str = "main") -> List["Row"]:
        """One row per training sequence. ``segments="main"``: one per rollout (its ``tokens``, the
        main sequence; the trainers' group statistics stay exact). ``segments="all"``: a rollout of
        several segments gives one row per segment, each with the rollout's reward (slime assigns a
        session's reward to every sample it yields: slime/agent/trajectory.py@624b824:307-343)."""
        if segments not in ("main", "all"):
            raise RaasError("bad_request", f'segments must be "main" or "all", got {segments!r}')
        if segments == "main":
            return [Row(g, r, 0, r.tokens) for g in self.groups for r in g.rollouts]
        return [Row(g, r, i, t) for g in self.groups for r in g.rollouts for i, t in enumerate(r.sequences())]

    def __len__(self) -> int:
        return sum(len(g.rollouts) for g in self.groups)
