"""rollout_metrics against what the trainers' trackers accept, on batches from a real raas run.

The facts each check re-expresses:
  veRL   = volcengine/verl@b178a3cd verl/utils/tracking.py
  NeMo   = NVIDIA-NeMo/RL@7ea279ab nemo_rl/utils/logger.py
and the sidecar's own run directory (metrics.jsonl, summary.json, plot.svg), as `raas train` writes it."""
from __future__ import annotations

import json
import math
import os
import re
import unittest

from tests.real_run import config, real_batches, require_built

from raas_bridge import Batch, rollout_metrics


def setUpModule() -> None:
    require_built()


class TrackingOnARealRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.raw = real_batches()
        cls.metrics = [rollout_metrics(b) for b in cls.raw]

    def test_every_key_is_a_section_path_veRL_trackers_accept(self) -> None:
        mlflow_invalid = re.compile(r"[^/\w.\- :]")  # veRL tracking.py:287-289 (MLflow's allowed characters)
        for m in self.metrics:
            self.assertGreater(len(m), 30)
            for k, v in m.items():
                self.assertTrue(k.startswith("rollout/"), k)
                # ClearML: `title, series = k.split("/", 1)` (tracking.py:210) needs a "/" in every key.
                title, series = k.split("/", 1)
                self.assertTrue(title and series, k)
                # MLflow: otherwise sanitized with a warning (tracking.py:291-296).
                self.assertIsNone(mlflow_invalid.search(k), k)
                self.assertNotIn("//", k)
                # ClearML reports int/float (tracking.py:212), TensorBoard add_scalar (tracking.py:271),
                # the file logger orjson-dumps it (tracking.py:252): a finite float.
                self.assertIsInstance(v, float, k)
                self.assertTrue(math.isfinite(v), k)
            json.dumps(m)

    def test_nemo_rl_gets_the_same_names_through_its_prefix(self) -> None:
        # NeMo's TensorboardLogger and MlflowLogger name a metric f"{prefix}/{name}" (logger.py:176, 919)
        # and take scalars (_coerce_to_scalar, logger.py:142-147).
        for b, m in zip(self.raw, self.metrics):
            bare = rollout_metrics(b, prefix="")
            self.assertEqual({f"rollout/{k}": v for k, v in bare.items()}, m)
            self.assertFalse(any(k.startswith("/") for k in bare))

    def test_the_figures_are_the_batch_s(self) -> None:
        for raw, m in zip(self.raw, self.metrics):
            b = Batch.from_dict(raw)
            s = b.stats
            finished = s["accepted"] + s["filtered"] + s.get("dropped_error", 0)
            self.assertAlmostEqual(m["rollout/reward/mean"], s["mean_reward"])
            self.assertAlmostEqual(m["rollout/reward/batch_mean"], sum(r.reward for r in b.rollouts) / len(b.rollouts))
            self.assertAlmostEqual(m["rollout/groups/informative_share"], s["accepted"] / finished)
            self.assertEqual(m["rollout/groups/in_batch"], len(b.groups))
            lengths = [sum(r.tokens.response_mask) for r in b.rollouts]
            self.assertAlmostEqual(m["rollout/response_length/mean"], sum(lengths) / len(lengths))
            self.assertEqual(m["rollout/response_length/max"], max(lengths))
            self.assertAlmostEqual(m["rollout/staleness/mean"], s["staleness_mean"])
            self.assertEqual(m["rollout/policy_version"], b.policy_version)
            # Stage times come from each result's timing: rollouts ran, so RUN took time.
            self.assertGreater(m["rollout/timing_s/run"], 0)
            self.assertGreater(m["rollout/timing_s/step"], 0)
        # The run truncates some rollouts (max_response_tokens 120) and updates the weights once.
        self.assertGreater(max(m["rollout/truncated/share"] for m in self.metrics), 0)
        self.assertEqual([m["rollout/policy_version"] for m in self.metrics], [0.0, 1.0])

    def test_the_sidecar_wrote_the_run_directory_raas_train_writes(self) -> None:
        run = os.path.join(config()["output_dir"], config()["name"])
        for f in ("metrics.jsonl", "summary.json", "plot.svg", "prompts.jsonl", "config.json"):
            self.assertTrue(os.path.exists(os.path.join(run, f)), f)
        with open(os.path.join(run, "metrics.jsonl"), encoding="utf-8") as f:
            records = [json.loads(line) for line in f]
        self.assertEqual([r["step"] for r in records], [0, 1])
        for r, m in zip(records, self.metrics):
            self.assertAlmostEqual(r["mean_reward"], m["rollout/reward/mean"])
            self.assertAlmostEqual(r["run_s_mean"], m["rollout/timing_s/run"])
        with open(os.path.join(run, "summary.json"), encoding="utf-8") as f:
            summary = json.load(f)
        self.assertEqual(summary["source"], "raas sidecar")
        self.assertEqual(len(summary["steps"]), 2)
        with open(os.path.join(run, "plot.svg"), encoding="utf-8") as f:
            self.assertTrue(f.read().startswith("<svg"))
        # Batches stay with the trainer unless --keep-batches.
        self.assertFalse(os.path.exists(os.path.join(run, "batches.jsonl")))


if __name__ == "__main__":
    unittest.main()
