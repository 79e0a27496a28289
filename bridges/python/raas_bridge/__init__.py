"""raas_bridge: a standard-library client of ``raas sidecar`` with veRL and NeMo RL adapters.

    from raas_bridge import RaasSidecar, to_verl, to_nemo_rl, rollout_metrics
"""
from .batch import LOGPROBS_MODES, TRUNCATED_FINISH_REASONS, Batch, Group, Message, Rollout, Row, Segment, Span, Tokens
from .client import RaasSidecar, default_command
from .errors import RaasError
from .nemo_rl import to_nemo_rl
from .tracking import rollout_metrics
from .verl import VERL_NON_TENSOR_KEYS, VERL_REWARD_EXTRA_KEYS, VERL_TENSOR_KEYS, split_verl, to_verl, verl_meta_info
from ._arrays import have_numpy

__version__ = "0.1.0"
__all__ = [
    "Row",
    "Segment",
    "Batch", "Group", "Message", "Rollout", "Span", "Tokens", "RaasSidecar", "default_command", "RaasError",
    "to_nemo_rl", "to_verl", "split_verl", "verl_meta_info", "VERL_TENSOR_KEYS", "VERL_NON_TENSOR_KEYS",
    "VERL_REWARD_EXTRA_KEYS", "LOGPROBS_MODES", "TRUNCATED_FINISH_REASONS", "have_numpy", "rollout_metrics",
]
