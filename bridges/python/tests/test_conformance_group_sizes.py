"""Adaptive group size against veRL's and NeMo RL's own code, on batches from a real raas run.

A run with ``selection.adaptive_n`` (the math tasks of configs/data, four prompts so each comes back
with a history and its own group size) in both batch modes:

- ``variable``: groups of different sizes reach the trainer. veRL's GRPO advantage groups rows by
  ``uid`` whatever their number (verl@b178a3cd verl/trainer/ppo/core_algos.py:303-330), NeMo RL's
  baseline by prompt (RL@7ea279ab nemo_rl/algorithms/utils.py:130-197), so both take them. What
  does not hold is a fixed row count: veRL's DAPO recipe cuts the batch at ``train_batch_size ×
  rollout.n`` rows (verl@246cac4c recipe/dapo/dapo_ray_trainer.py:286-288), NeMo RL's dynamic
  sampling at ``num_prompts_per_step × num_generations_per_prompt`` (RL@7ea279ab
  nemo_rl/algorithms/grpo.py:1738-1741, 1818-1821), and veRL's DataProto.chunk needs a row count
  divisible by the data-parallel size (verl@b178a3cd verl/protocol.py:884-887).
- ``fixed``: every group in the batch has exactly ``n`` rows, so those cuts keep whole groups.

The reference code is tests/reference_verl.py and tests/reference_nemo_rl.py. Needs numpy and
torch (python3-numpy, python3-torch)."""
from __future__ import annotations

import copy
import io
import json
import os
import unittest
from collections import Counter
from typing import Any, Dict, List

from tests.helpers import CLI, NODE
from tests.real_run import MATH, _tmp, config, require_built, require_torch

from raas_bridge import Batch, RaasSidecar, to_nemo_rl, to_verl

PAD = 151643
R = 256
N = 4
B = 2
_cache: Dict[str, List[Dict[str, Any]]] = {}


def setUpModule() -> None:
    global torch, ref_verl, ref_nemo
    require_built()
    torch = require_torch()
    from tests import reference_nemo_rl as ref_nemo  # noqa: F811
    from tests import reference_verl as ref_verl  # noqa: F811


def adaptive_batches(batch: str, steps: int = 4) -> List[Dict[str, Any]]:
    """``steps`` batches of a real run with adaptive n in batch mode ``batch``."""
    require_built()
    if batch not in _cache:
        cfg = config()
        adaptive = {"min": 2, "max": 8} if batch == "variable" else {"batch": "fixed", "max": 12, "target_mixed": 0.6}
        cfg.update({
            "name": f"group-sizes-{batch}", "n": N, "batch_size": B, "steps": steps,
            "dataset": {"path": MATH, "limit": 4}, "selection": {"adaptive_n": adaptive},
            "output_dir": os.path.join(_tmp, f"runs-sizes-{batch}"),
        })
        path = os.path.join(_tmp, f"sizes-{batch}.yaml")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(cfg, f)
        out = []
        with RaasSidecar(path, command=[NODE, CLI, "sidecar", "--config", path, "--return-messages"], log_stream=io.StringIO()) as rs:
            for _ in range(steps):
                out.append(rs.next_batch(timeout_s=300, raw=True))
                rs.update_weights()
        _cache[batch] = out
    return copy.deepcopy(_cache[batch])


def longest_prompt(batches: List[Batch]) -> int:
    longest = max(len(r.tokens.prompt_ids) for b in batches for r in b.rollouts)
    return (longest // 64 + 1) * 64


class VariableSizes(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.batches = [Batch.from_dict(d) for d in adaptive_batches("variable")]
        cls.P = longest_prompt(cls.batches)

    def test_the_run_hands_over_groups_of_different_sizes_within_the_bounds(self):
        sizes = [len(g.rollouts) for b in self.batches for g in b.groups]
        self.assertGreater(len(set(sizes)), 1, sizes)
        self.assertTrue(all(2 <= s <= 8 for s in sizes), sizes)

    def test_verl_grpo_advantage_by_uid_is_raas_advantage_for_every_group_size(self):
        for b in self.batches:
            out = to_verl(b, self.P, R, PAD, tensor=torch.as_tensor)
            # verl@b178a3cd verl/trainer/ppo/core_algos.py:303-330: id2score per uid, any count
            adv, _ = ref_verl.compute_grpo_outcome_advantage(out["rm_scores"], out["response_mask"], out["uid"])
            for i, r in enumerate(b.rollouts):
                mask = out["response_mask"][i].bool()
                self.assertAlmostEqual(float(adv[i][mask][0]), r.advantage, places=4, msg=r.job_id)
            # DAPO's filter_groups keeps every row: each uid's rewards vary
            self.assertEqual(ref_verl.filter_groups(out["uid"], out["acc"]), list(range(len(b))))

    def test_a_fixed_row_count_does_not_hold(self):
        # veRL's recipe keeps batch[:train_batch_size * rollout.n]; with sizes other than n that cut
        # drops or splits groups (so use batch: fixed for it, or a trainer that takes any count).
        counts = [len(b) for b in self.batches]
        self.assertTrue(any(c != B * N for c in counts), counts)

    def test_nemo_rl_baseline_per_prompt_is_the_groups_leave_one_out_mean_for_every_group_size(self):
        for b in self.batches:
            out = to_nemo_rl(b, tensor=torch.as_tensor)
            prompts = ref_nemo.prompt_ids_for_adv(out["message_log"], out["length"], PAD)
            baseline, _ = ref_nemo.calculate_baseline_and_std_per_prompt(prompts, out["total_reward"], torch.ones(len(b)))
            per_prompt = Counter(tuple(r.tokens.prompt_ids) for r in b.rollouts)
            rows = 0
            for g in b.groups:
                shaped = [r.shaped_reward for r in g.rollouts]
                alone = per_prompt[tuple(g.rollouts[0].tokens.prompt_ids)] == len(g.rollouts)
                for k in range(len(g.rollouts)):
                    # NeMo RL groups by prompt: two groups of one prompt in a batch share a baseline
                    if alone:
                        rest = shaped[:k] + shaped[k + 1:]
                        self.assertAlmostEqual(float(baseline[rows + k]), sum(rest) / len(rest), places=5, msg=g.group_id)
                rows += len(g.rollouts)


class FixedBatch(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.batches = [Batch.from_dict(d) for d in adaptive_batches("fixed")]
        cls.P = longest_prompt(cls.batches)

    def test_every_group_in_the_batch_has_n_rollouts_and_larger_groups_were_trimmed(self):
        for b in self.batches:
            self.assertEqual([len(g.rollouts) for g in b.groups], [N] * B)
            self.assertEqual(len(b), B * N)
        self.assertGreater(sum(int(b.stats.get("rollouts_trimmed", 0)) for b in self.batches), 0,
                           "under the prior a group of 8 is mixed with probability 0.61 ≥ target_mixed 0.6: groups grow to 8 and are trimmed to n")

    def test_verl_recipe_cut_and_dp_chunking_keep_whole_groups(self):
        for b in self.batches:
            out = to_verl(b, self.P, R, PAD, tensor=torch.as_tensor)
            uids = list(out["uid"])
            # verl@246cac4c recipe/dapo/dapo_ray_trainer.py:286-288
            kept = uids[: B * N]
            self.assertEqual(Counter(kept), Counter({g.group_id: N for g in b.groups}))
            # verl@b178a3cd verl/protocol.py:884-887: equal chunks for data-parallel sizes dividing B × n
            for dp in (1, 2, 4, 8):
                self.assertEqual(len(uids) % dp, 0)
            adv, _ = ref_verl.compute_grpo_outcome_advantage(out["rm_scores"], out["response_mask"], out["uid"])
            for i, r in enumerate(b.rollouts):
                mask = out["response_mask"][i].bool()
                self.assertAlmostEqual(float(adv[i][mask][0]), r.advantage, places=4, msg=r.job_id)

    def test_nemo_rl_train_prompts_size_slice_keeps_whole_groups(self):
        for b in self.batches:
            out = to_nemo_rl(b, tensor=torch.as_tensor)
            # RL@7ea279ab nemo_rl/algorithms/grpo.py:1738-1741, 1818-1821: sliced to prompts × generations
            self.assertEqual(len(out["total_reward"]), B * N)
            prompts = ref_nemo.prompt_ids_for_adv(out["message_log"], out["length"], PAD)
            _, counts = torch.unique(prompts, dim=0, return_counts=True)
            self.assertTrue(all(int(c) % N == 0 for c in counts), counts)


if __name__ == "__main__":
    unittest.main()
