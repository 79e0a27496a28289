"""Batches from a real raas run, for the conformance tests: ``raas sidecar`` on an embedded config
(a local rollout server and simulated vLLM backends) with the math tasks of configs/data (distinct
prompts with a system block, tool observations, several turns), sampled at temperature 0.8 and
top-p 0.95 from backends started with ``--logprobs-mode processed_logprobs``, a response budget
that truncates some rollouts, DAPO's overlong shaping (so shaped and task rewards differ) and one
weight update between the two steps (so the second batch holds stale rollouts).

Each configuration runs once per process (the answer is cached); the run's files go to a temporary
directory removed at exit."""
from __future__ import annotations

import atexit
import copy
import io
import json
import os
import shutil
import tempfile
import unittest
from typing import Any, Dict, List, Tuple

from tests.helpers import CLI, NODE, ROOT

from raas_bridge import RaasSidecar

MATH = os.path.join(ROOT, "configs", "data", "math.jsonl")
SAMPLING = {"temperature": 0.8, "top_p": 0.95, "max_tokens_per_turn": 256, "max_iterations": 6, "max_response_tokens": 120}

_cache: Dict[Tuple[str, int], List[Dict[str, Any]]] = {}
_tmp = tempfile.mkdtemp(prefix="raas-conformance-")
atexit.register(shutil.rmtree, _tmp, True)


def require_built() -> None:
    """Skips the calling test when the sidecar is not built."""
    if not os.path.exists(CLI):
        raise unittest.SkipTest("dist/src/cli.js is not built: run npm run build (scripts/setup.sh does)")


def require_torch() -> Any:
    """torch and numpy, or a skip naming how to install them."""
    try:
        import numpy  # noqa: F401
        import torch
    except ImportError as e:
        raise unittest.SkipTest(
            f"{e.name} is missing: the conformance tests re-express the trainers in numpy/torch; "
            "install python3-numpy and python3-torch (apt; scripts/setup.sh does)"
        )
    return torch


def config(logprobs_mode: str = "processed_logprobs") -> Dict[str, Any]:
    """The run's config (YAML is a superset of JSON)."""
    return {
        "name": "conformance",
        "seed": 7,
        "embedded": {
            "servers": 1,
            "backends": 2,
            "sim": {"logprobs_mode": logprobs_mode},
            "server": {"workers": {"init": 8, "run": 16, "eval": 8}},
        },
        "dataset": {"path": MATH},
        "n": 4,
        "batch_size": 4,
        "steps": 3,
        "return_messages": True,
        "sampling_params": dict(SAMPLING),
        "overlong": {"enabled": True, "max_tokens": 120, "buffer": 40, "penalty_factor": 1.0},
        "output_dir": os.path.join(_tmp, f"runs-{logprobs_mode}"),
    }


def real_batches(logprobs_mode: str = "processed_logprobs", steps: int = 2) -> List[Dict[str, Any]]:
    """``steps`` batches as the sidecar answered them (dicts), with update_weights between them."""
    require_built()
    key = (logprobs_mode, steps)
    if key not in _cache:
        path = os.path.join(_tmp, f"{logprobs_mode}.yaml")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(config(logprobs_mode), f)
        out = []
        with RaasSidecar(path, command=[NODE, CLI, "sidecar", "--config", path, "--return-messages"], log_stream=io.StringIO()) as rs:
            for _ in range(steps):
                out.append(rs.next_batch(timeout_s=300, raw=True))
                rs.update_weights()
        _cache[key] = out
    return copy.deepcopy(_cache[key])
