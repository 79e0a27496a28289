"""Raw and processed logprobs (vLLM's ``--logprobs-mode``): the simulated backend against vLLM's
sampler re-expressed in tests/reference_vllm.py, and a real raas run's batch carrying what the
backend returned. Needs torch (python3-torch)."""
from __future__ import annotations

import json
import subprocess
import unittest
import urllib.request
from typing import Any, Dict, List

from tests.helpers import CLI, NODE
from tests.real_run import SAMPLING, real_batches, require_built, require_torch

from raas_bridge import Batch

# A Qwen3 prompt in token ids (docs: the wire-format reference's "What is 2+2?").
PROMPT = [151644, 872, 198, 3838, 374, 220, 17, 10, 17, 30, 151645, 198, 151644, 77091, 198, 151667, 271, 151668, 271]
TOL = 2e-6  # logprobs travel rounded to 6 decimals


def setUpModule() -> None:
    global torch, ref
    require_built()
    torch = require_torch()
    from tests import reference_vllm as ref  # noqa: F811 (imports torch)


class SimServer:
    """``raas sim-llm --logprobs-mode <mode>`` on a free port."""

    def __init__(self, mode: str) -> None:
        self.proc = subprocess.Popen([NODE, CLI, "sim-llm", "--port", "0", "--seed", "3", "--logprobs-mode", mode],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            self.close()
            raise RuntimeError(f"sim-llm did not start: {line!r} {self.proc.stderr.read()!r}")
        self.url = line.split("listening on ")[1].split()[0]

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=30) as res:
            return json.loads(res.read())

    def complete(self, **params: Any) -> Dict[str, Any]:
        body = {"prompt": PROMPT, "max_tokens": 64, "seed": 1234, "logprobs": 3, "return_token_ids": True,
                "return_tokens_as_token_ids": True, **params}
        req = urllib.request.Request(self.url + "/v1/completions", data=json.dumps(body).encode(), headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as res:
            return json.loads(res.read())["choices"][0]

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)
        self.proc.stdout.close()
        self.proc.stderr.close()


def expected(raw: List[float], mode: str, **sampling: Any) -> List[Any]:
    """Per position, what vLLM's sampler reports for the simulated distribution (None: too large to build)."""
    out = []
    for a in raw:
        logits = ref.simulated_logits(a)
        out.append(None if logits is None else float(ref.logprobs(logits, mode, **sampling)[0, 0]))
    return out


class SimulatedBackendTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.raw = SimServer("raw_logprobs")
        cls.processed = SimServer("processed_logprobs")

    @classmethod
    def tearDownClass(cls) -> None:
        for s in (cls.raw, cls.processed):
            s.close()
            assert s.proc.returncode is not None

    def test_server_info_says_which_logprobs_the_server_returns(self):
        # vLLM's dev-mode GET /server_info?config_format=json dumps the engine config
        self.assertEqual(self.raw.get("/server_info?config_format=json")["vllm_config"]["model_config"]["logprobs_mode"], "raw_logprobs")
        self.assertIn("logprobs_mode=processed_logprobs", self.processed.get("/server_info")["vllm_config"])

    def test_raw_logprobs_ignore_temperature_and_top_p(self):
        a = self.raw.complete(temperature=1.0)
        b = self.raw.complete(temperature=0.6, top_p=0.8)
        self.assertEqual(a["token_ids"], b["token_ids"])
        self.assertEqual(a["logprobs"]["token_logprobs"], b["logprobs"]["token_logprobs"])
        # the tail the simulator reports is the distribution the reference rebuilds
        for lp, top, tok in zip(a["logprobs"]["token_logprobs"], a["logprobs"]["top_logprobs"], a["logprobs"]["tokens"]):
            logits = ref.simulated_logits(lp)
            alternatives = [v for k, v in top.items() if k != tok and v > -9999]
            if logits is not None and logits.shape[1] > 1 and alternatives:
                self.assertAlmostEqual(alternatives[0], float(logits[0, 1]), delta=TOL)

    def test_processed_equals_raw_at_temperature_1_without_top_p_or_top_k(self):
        raw = self.raw.complete(temperature=1.0)
        proc = self.processed.complete(temperature=1.0, top_p=1.0)
        self.assertEqual(proc["token_ids"], raw["token_ids"])
        self.assertEqual(proc["logprobs"]["token_logprobs"], raw["logprobs"]["token_logprobs"])

    def test_processed_logprobs_are_vllms_after_temperature_top_k_and_top_p(self):
        for sampling in ({"temperature": 0.7, "top_p": 0.9}, {"temperature": 1.3, "top_p": 1.0}, {"temperature": 0.5, "top_p": 1.0, "top_k": 1},
                         {"temperature": 0.8, "top_p": 0.95, "top_k": 20}, {"temperature": 0.0}):
            raw = self.raw.complete(**sampling)["logprobs"]["token_logprobs"]
            got = self.processed.complete(**sampling)["logprobs"]["token_logprobs"]
            want = expected(raw, "processed_logprobs", **sampling)
            checked = 0
            for g, w in zip(got, want):
                if w is not None:
                    self.assertAlmostEqual(g, max(w, -9999.0), delta=TOL, msg=str(sampling))
                    checked += 1
            self.assertGreater(checked, len(got) // 2, sampling)
            if sampling["temperature"] in (0.0, 1.0) and sampling.get("top_p", 1.0) == 1.0 and not sampling.get("top_k"):
                self.assertEqual(got, raw)
            else:
                self.assertGreater(sum(abs(x - y) > TOL for x, y in zip(got, raw)), len(raw) // 2, sampling)


class RaasRunTest(unittest.TestCase):
    """Through raas: backends started with processed logprobs put them in the batch, aligned."""

    def test_the_batch_carries_the_logprobs_the_backend_returned(self):
        processed = {r.job_id: r for r in Batch.from_dict(real_batches("processed_logprobs")[0]).rollouts}
        raw = {r.job_id: r for r in Batch.from_dict(real_batches("raw_logprobs", steps=1)[0]).rollouts}
        common = [j for j in processed if j in raw and processed[j].tokens.response_ids == raw[j].tokens.response_ids]
        self.assertGreater(len(common), 0)
        sampling = {"temperature": SAMPLING["temperature"], "top_p": SAMPLING["top_p"]}
        differ = 0
        for j in common:
            p, r = processed[j].tokens, raw[j].tokens
            gen = [i for i, m in enumerate(r.response_mask) if m]
            want = expected([r.logprobs[i] for i in gen], "processed_logprobs", **sampling)
            for i, w in zip(gen, want):
                if w is not None:
                    self.assertAlmostEqual(p.logprobs[i], w, delta=TOL, msg=j)
                differ += abs(p.logprobs[i] - r.logprobs[i]) > TOL
            self.assertTrue(all(x == 0 for x, m in zip(p.logprobs, p.response_mask) if not m))
        self.assertGreater(differ, 0)


if __name__ == "__main__":
    unittest.main()
