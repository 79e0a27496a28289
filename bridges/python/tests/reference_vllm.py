"""vLLM's raw and processed logprobs (``--logprobs-mode``), re-expressed in torch from its source.

Sources: vllm-project/vllm ``vllm/v1/sample/sampler.py`` at 3e342658b2e9c85a30a54d19e64e5ad77b8a26a6
(``vllm@3e342658``) and ``vllm/v1/sample/ops/topk_topp_sampler.py`` at
01fa3fe74b058bb604f236341ab2361c7cf3d25b (``vllm@01fa3fe7``)."""
from __future__ import annotations

import math
from typing import Optional

import torch

_SAMPLING_EPS = 1e-5  # vllm@3e342658 vllm/v1/sample/sampler.py:17


def apply_top_k_top_p_pytorch(logits: torch.Tensor, k: Optional[torch.Tensor], p: Optional[torch.Tensor]) -> torch.Tensor:
    # vllm@01fa3fe7 vllm/v1/sample/ops/topk_topp_sampler.py, apply_top_k_top_p_pytorch
    if p is None and k is None:
        return logits
    logits_sort, logits_idx = logits.sort(dim=-1, descending=False)
    if k is not None:
        top_k_mask = logits_sort.size(1) - k.to(torch.long)
        top_k_mask = logits_sort.gather(1, top_k_mask.unsqueeze(dim=1))
        top_k_mask = logits_sort < top_k_mask
        logits_sort.masked_fill_(top_k_mask, -float("inf"))
    if p is not None:
        probs_sort = logits_sort.softmax(dim=-1)
        probs_sum = torch.cumsum(probs_sort, dim=-1, out=probs_sort)
        top_p_mask = probs_sum <= 1 - p.unsqueeze(dim=1)
        top_p_mask[:, -1] = False
        logits_sort.masked_fill_(top_p_mask, -float("inf"))
    return logits.scatter_(dim=-1, index=logits_idx, src=logits_sort)


def logprobs(logits: torch.Tensor, mode: str, temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0) -> torch.Tensor:
    """The logprobs a request gets for one row of ``logits`` ([1, V], float64 here)."""
    if mode == "raw_logprobs":
        # vllm@3e342658 vllm/v1/sample/sampler.py: compute_logprobs(logits) before any processing
        return logits.log_softmax(dim=-1)
    if temperature < _SAMPLING_EPS:
        # sampler.py, sample(): an all-greedy batch returns log_softmax of the unprocessed logits
        return logits.log_softmax(dim=-1)
    # sampler.py, sample(): temperature, then TopKTopPSampler.forward_native (topk_topp_sampler.py)
    scaled = logits / temperature
    k = torch.tensor([top_k]) if top_k and top_k > 0 else None
    p = torch.tensor([top_p], dtype=logits.dtype) if top_p < 1.0 else None
    return apply_top_k_top_p_pytorch(scaled, k, p).log_softmax(dim=-1)


def simulated_logits(raw_logprob: float) -> Optional[torch.Tensor]:
    """The simulator's distribution at a position whose sampled token has raw logprob ``a``
    (src/sim/logprobs.ts): index 0 is the sampled token (probability p = e^a), then m equal tail
    tokens sharing 1 − p, m = floor((1 − p) / p) + 1; the rest of a vocabulary (64 ids at least here)
    has probability 0. None when m is too large to build."""
    p = math.exp(raw_logprob)
    m = math.floor((1 - p) / p) + 1
    if m > 200_000:
        return None
    tail = math.log1p(-p) - math.log(m) if p < 1 else -math.inf
    rest = max(0, 64 - 1 - m)
    return torch.tensor([[raw_logprob] + [tail] * m + [-math.inf] * rest], dtype=torch.float64)
