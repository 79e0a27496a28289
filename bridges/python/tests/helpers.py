"""Batches built by hand for the adapter tests, and paths to the repository's sidecar."""
from __future__ import annotations

import os
import sys
from typing import Any, Dict, List, Optional

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
NODE = os.environ.get("RAAS_NODE", "node")
SCRIPTED = os.path.join(ROOT, "test", "sidecar", "fixtures", "scripted-sidecar.mjs")
CLI = os.path.join(ROOT, "dist", "src", "cli.js")
DEMO = os.path.join(ROOT, "configs", "demo.yaml")

sys.path.insert(0, os.path.join(ROOT, "bridges", "python"))


def rollout(job_id: str, prompt: List[int], turns: List[List[int]], obs: List[List[int]], *, shaped: float = 1.0,
            reward: Optional[float] = None, spans: bool = True, messages: bool = True) -> Dict[str, Any]:
    """A rollout dict: assistant turns interleaved with observations (turns[i], then obs[i] if any)."""
    resp: List[int] = []
    mask: List[int] = []
    lps: List[float] = []
    sp: List[Dict[str, int]] = []
    msgs: List[Dict[str, Any]] = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    for i, turn in enumerate(turns):
        start = len(resp)
        resp += turn
        mask += [1] * len(turn)
        lp = [-(k + 1) / 10 for k in range(len(turn))]
        lps += lp
        sp.append({"message_index": len(msgs), "start": start, "end": len(resp)})
        msgs.append({"role": "assistant", "content": f"a{i}", "token_ids": turn, "logprobs": lp})
        if i < len(obs):
            start = len(resp)
            resp += obs[i]
            mask += [0] * len(obs[i])
            lps += [0.0] * len(obs[i])
            sp.append({"message_index": len(msgs), "start": start, "end": len(resp)})
            msgs.append({"role": "tool", "content": f"o{i}"})
    tokens: Dict[str, Any] = {"prompt_ids": prompt, "response_ids": resp, "response_mask": mask, "logprobs": lps}
    if spans:
        tokens["spans"] = sp
    r: Dict[str, Any] = {
        "job_id": job_id, "trajectory_id": job_id, "reward": shaped if reward is None else reward, "shaped_reward": shaped,
        "advantage": 0.5, "policy_version": 0, "staleness": 0, "weight_versions": ["0"], "finish_reason": "finish",
        "num_turns": len(turns), "tokens": tokens,
    }
    if messages:
        r["messages"] = msgs
    return r


def batch(groups: List[List[Dict[str, Any]]], step: int = 0) -> Dict[str, Any]:
    return {
        "step": step, "policy_version": 0,
        "groups": [{"group_id": f"g{i}", "instance_id": i, "data_source": "chat", "rollouts": rs} for i, rs in enumerate(groups)],
        "stats": {"accepted": len(groups)},
    }
