"""to_verl / to_nemo_rl on hand-built batches: shapes, masks, padding, truncation, consistency."""
from __future__ import annotations

import unittest
from contextlib import contextmanager

from tests.helpers import batch, rollout

import raas_bridge._arrays as arrays
from raas_bridge import VERL_NON_TENSOR_KEYS, VERL_TENSOR_KEYS, Batch, RaasError, split_verl, to_nemo_rl, to_verl, verl_meta_info

PAD = 151643


def tolist(x):
    return x.tolist() if hasattr(x, "tolist") else x


def shape(x):
    """numpy's shape, or the same for lists of equal-length rows."""
    if hasattr(x, "shape"):
        return tuple(x.shape)
    return (len(x), len(x[0])) if x and isinstance(x[0], list) else (len(x),)


@contextmanager
def without_numpy():
    saved = arrays.np
    arrays.np = None
    try:
        yield
    finally:
        arrays.np = saved


def sample() -> Batch:
    a = rollout("a", [1, 2, 3], [[10, 11], [12]], [[90, 91, 92]], shaped=1.0)
    b = rollout("b", [1, 2, 3], [[20, 21, 22, 23]], [], shaped=-0.5, reward=0.0)
    c = rollout("c", [4, 5], [[30], [31, 32]], [[93]], shaped=0.25)
    return Batch.from_dict(batch([[a, b], [c]]))


class ToVerlTest(unittest.TestCase):
    def test_keys_shapes_and_dtypes(self):
        out = to_verl(sample(), max_prompt_len=4, max_response_len=8, pad_id=PAD)
        self.assertEqual(set(out), set(VERL_TENSOR_KEYS) | set(VERL_NON_TENSOR_KEYS))
        self.assertEqual(shape(out["prompts"]), (3, 4))
        for k in ("responses", "response_mask", "rollout_log_probs", "rm_scores"):
            self.assertEqual(shape(out[k]), (3, 8), k)
        for k in ("input_ids", "attention_mask", "position_ids"):
            self.assertEqual(shape(out[k]), (3, 12), k)
        if arrays.have_numpy():
            self.assertEqual(str(out["input_ids"].dtype), "int64")
            self.assertEqual(str(out["rollout_log_probs"].dtype), "float32")
            self.assertEqual(str(out["rm_scores"].dtype), "float32")
            self.assertEqual(str(out["uid"].dtype), "object")
        self.assertEqual(tolist(out["uid"]), ["g0", "g0", "g1"])
        # veRL counts assistant turns + observation blocks + 1 (tool_agent_loop.py@b178a3cd:204)
        self.assertEqual(tolist(out["__num_turns__"]), [4, 2, 4])
        self.assertEqual(tolist(out["multi_modal_inputs"]), [{}, {}, {}])
        self.assertEqual(tolist(out["acc"]), [1.0, 0.0, 0.25])
        self.assertEqual(tolist(out["score"]), tolist(out["acc"]))
        self.assertEqual(tolist(out["data_source"]), ["chat"] * 3)
        self.assertEqual(tolist(out["policy_version"]), [0, 0, 0])
        self.assertEqual(tolist(out["staleness"]), [0, 0, 0])
        tensors, non_tensors = split_verl(out)
        self.assertEqual(set(non_tensors), set(VERL_NON_TENSOR_KEYS))
        self.assertEqual(set(tensors), set(VERL_TENSOR_KEYS))

    def test_padding_masks_positions(self):
        out = to_verl(sample(), max_prompt_len=4, max_response_len=8, pad_id=PAD)
        a = {k: tolist(v)[0] for k, v in out.items()}
        self.assertEqual(a["prompts"], [PAD, 1, 2, 3])
        self.assertEqual(a["responses"], [10, 11, 90, 91, 92, 12, PAD, PAD])
        self.assertEqual(a["response_mask"], [1, 1, 0, 0, 0, 1, 0, 0])
        self.assertEqual(a["input_ids"], a["prompts"] + a["responses"])
        self.assertEqual(a["attention_mask"], [0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0])
        self.assertEqual(a["position_ids"], [0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 8, 8])
        lp = a["rollout_log_probs"]
        self.assertAlmostEqual(lp[0], -0.1, places=6)
        self.assertAlmostEqual(lp[5], -0.1, places=6)
        self.assertEqual(lp[2:5] + lp[6:], [0.0] * 5)
        # the shaped reward sits on the last model-generated id only
        self.assertEqual(a["rm_scores"], [0, 0, 0, 0, 0, 1.0, 0, 0])
        b = {k: tolist(v)[1] for k, v in out.items()}
        self.assertEqual(b["rm_scores"], [0, 0, 0, -0.5, 0, 0, 0, 0])
        self.assertEqual(b["response_mask"], [1, 1, 1, 1, 0, 0, 0, 0])

    def test_reward_on_last_generated_id_when_the_trajectory_ends_with_an_observation(self):
        r = rollout("x", [1], [[10, 11]], [[90, 91]], shaped=2.0)
        out = to_verl(Batch.from_dict(batch([[r]])), 2, 6, PAD)
        self.assertEqual(tolist(out["rm_scores"])[0], [0, 2.0, 0, 0, 0, 0])

    def test_truncation_left_keeps_prompt_end_and_response_start_and_warns(self):
        b = sample()
        out = to_verl(b, max_prompt_len=2, max_response_len=3, pad_id=PAD, truncation="left")
        self.assertEqual(b.stats["truncated_prompts"], 2)
        self.assertEqual(b.stats["truncated_responses"], 3)
        self.assertTrue(any("cut the start of 2 prompts" in w for w in b.stats["warnings"]), b.stats["warnings"])
        a = {k: tolist(v)[0] for k, v in out.items()}
        self.assertEqual(a["prompts"], [2, 3])
        self.assertEqual(a["responses"], [10, 11, 90])
        self.assertEqual(a["response_mask"], [1, 1, 0])
        # the last generated id inside the window carries the reward
        self.assertEqual(a["rm_scores"], [0, 1.0, 0])
        self.assertEqual(a["position_ids"], [0, 1, 2, 3, 4])

    def test_truncation_error_is_the_default_and_names_the_rollout_and_limits(self):
        with self.assertRaises(RaasError) as cm:
            to_verl(sample(), max_prompt_len=2, max_response_len=3, pad_id=PAD)
        self.assertEqual(cm.exception.code, "bad_request")
        self.assertIn("rollout a", cm.exception.message)
        self.assertIn("max_prompt_len=2", cm.exception.message)
        self.assertIn("truncation='left'", cm.exception.message)
        with self.assertRaises(RaasError) as cm:
            to_verl(sample(), max_prompt_len=4, max_response_len=3, pad_id=PAD)
        self.assertIn("max_response_len=3", cm.exception.message)
        with self.assertRaises(RaasError):
            to_verl(sample(), 4, 8, PAD, truncation="right")

    def test_meta_info_carries_temperature_and_reward_extra_keys(self):
        b = sample()
        self.assertEqual(verl_meta_info(b, 0.7), {
            "temperature": 0.7, "global_steps": 0, "reward_extra_keys": ["acc", "score"], "logprobs_mode": None, "policy_version": 0})

    def test_expected_logprobs_mode_is_checked(self):
        d = batch([[rollout("a", [1], [[10]], [])]])
        to_verl(Batch.from_dict(d), 2, 2, PAD)  # no expectation: nothing checked
        b = Batch.from_dict(d)
        to_verl(b, 2, 2, PAD, expect_logprobs_mode="processed_logprobs")
        self.assertIn("does not record its logprobs mode", b.stats["warnings"][0])
        d["logprobs_mode"] = "raw_logprobs"
        for fn in (lambda b: to_verl(b, 2, 2, PAD, expect_logprobs_mode="processed_logprobs"),
                   lambda b: to_nemo_rl(b, expect_logprobs_mode="processed_logprobs")):
            with self.assertRaises(RaasError) as cm:
                fn(Batch.from_dict(d))
            self.assertEqual(cm.exception.code, "logprobs_mode_mismatch")
            self.assertIn("--logprobs-mode processed_logprobs", cm.exception.message)
        d["logprobs_mode"] = "processed_logprobs"
        to_verl(Batch.from_dict(d), 2, 2, PAD, expect_logprobs_mode="processed_logprobs")
        d["logprobs_mode"] = "raw_logits"
        with self.assertRaises(RaasError) as cm:
            Batch.from_dict(d)
        self.assertEqual(cm.exception.code, "bad_batch")

    def test_lists_without_numpy_equal_numpy_arrays(self):
        with_np = to_verl(sample(), 4, 8, PAD)
        with without_numpy():
            plain = to_verl(sample(), 4, 8, PAD)
        for k, v in plain.items():
            self.assertIsInstance(v, list, k)
            if k in ("rollout_log_probs", "rm_scores"):
                rnd = lambda rows: [[round(x, 6) for x in row] for row in rows]  # noqa: E731 (float32 vs float)
                self.assertEqual(rnd(v), rnd(tolist(with_np[k])), k)
            else:
                self.assertEqual(v, tolist(with_np[k]), k)


class ToNemoRlTest(unittest.TestCase):
    def test_message_log_cut_by_spans(self):
        out = to_nemo_rl(sample())
        self.assertEqual(len(out["message_log"]), 3)
        log = out["message_log"][0]
        self.assertEqual([m["role"] for m in log], ["user", "assistant", "tool", "assistant"])
        self.assertEqual([tolist(m["token_ids"]) for m in log], [[1, 2, 3], [10, 11], [90, 91, 92], [12]])
        self.assertEqual(log[0]["content"], "sys\ntask")
        self.assertEqual(log[1]["content"], "a0")
        self.assertEqual([round(x, 6) for x in tolist(log[1]["generation_logprobs"])], [-0.1, -0.2])
        self.assertNotIn("generation_logprobs", log[2])
        self.assertEqual([round(x, 6) for x in tolist(out["total_reward"])], [1.0, -0.5, 0.25])
        self.assertEqual(tolist(out["unshaped_total_reward"]), [1.0, 0.0, 0.25])
        self.assertEqual(out["group_ids"], ["g0", "g0", "g1"])
        self.assertEqual(tolist(out["idx"]), [0, 0, 1])
        # the prompt length: NeMo RL cuts the initial prompt out of the log with it
        self.assertEqual(tolist(out["length"]), [3, 3, 2])
        self.assertEqual(tolist(out["truncated"]), [False, False, False])
        self.assertEqual(tolist(out["loss_multiplier"]), [1.0, 1.0, 1.0])
        self.assertEqual(out["task_name"], ["chat"] * 3)

    def test_truncated_follows_the_finish_reason(self):
        rs = [rollout(k, [1], [[10]], []) for k in ("a", "b", "c")]
        rs[1]["finish_reason"] = "max_response_tokens"
        rs[2]["finish_reason"] = "max_model_len"
        out = to_nemo_rl(Batch.from_dict(batch([rs])))
        self.assertEqual(tolist(out["truncated"]), [False, True, True])

    def test_without_spans_or_messages_segments_follow_the_mask(self):
        r = rollout("x", [1, 2], [[10, 11], [12]], [[90, 91]], spans=False, messages=False)
        log = to_nemo_rl(Batch.from_dict(batch([[r]])))["message_log"][0]
        self.assertEqual([m["role"] for m in log], ["user", "assistant", "tool", "assistant"])
        self.assertEqual([tolist(m["token_ids"]) for m in log], [[1, 2], [10, 11], [90, 91], [12]])

    def test_ids_no_span_covers_still_appear(self):
        r = rollout("x", [1], [[10, 11], [12]], [[90, 91]])
        r["tokens"]["spans"] = r["tokens"]["spans"][:1]  # only the first assistant turn has a span
        log = to_nemo_rl(Batch.from_dict(batch([[r]])))["message_log"][0]
        self.assertEqual([tolist(m["token_ids"]) for m in log], [[1], [10, 11], [90, 91], [12]])
        self.assertEqual([m["role"] for m in log], ["user", "assistant", "tool", "assistant"])

    def test_consistent_with_to_verl(self):
        b = sample()
        verl = to_verl(b, 8, 16, PAD)
        nemo = to_nemo_rl(b)
        for i, log in enumerate(nemo["message_log"]):
            ids = [t for m in log for t in tolist(m["token_ids"])]
            row = tolist(verl["input_ids"])[i]
            attn = tolist(verl["attention_mask"])[i]
            self.assertEqual(ids, [t for t, a in zip(row, attn) if a])
            gen = [t for m in log if m["role"] == "assistant" for t in tolist(m["token_ids"])]
            resp = tolist(verl["responses"])[i]
            mask = tolist(verl["response_mask"])[i]
            self.assertEqual(gen, [t for t, m in zip(resp, mask) if m])
            self.assertEqual(ids[:tolist(nemo["length"])[i]], tolist(log[0]["token_ids"]))


class TensorHookTest(unittest.TestCase):
    """``tensor=`` converts arrays as torch.as_tensor would, without the bridge importing torch."""

    class Wrapped:
        def __init__(self, v):
            self.v = tolist(v)

    def test_to_verl_converts_the_tensor_part_only(self):
        out = to_verl(sample(), 4, 8, PAD, tensor=self.Wrapped)
        for k in VERL_TENSOR_KEYS:
            self.assertIsInstance(out[k], self.Wrapped, k)
        self.assertEqual(tolist(out["uid"]), ["g0", "g0", "g1"])

    def test_to_nemo_rl_converts_numeric_arrays(self):
        out = to_nemo_rl(sample(), tensor=self.Wrapped)
        log = out["message_log"][0]
        self.assertEqual([m["token_ids"].v for m in log], [[1, 2, 3], [10, 11], [90, 91, 92], [12]])
        self.assertIsInstance(log[1]["generation_logprobs"], self.Wrapped)
        for k in ("total_reward", "unshaped_total_reward", "truncated", "idx", "length", "loss_multiplier", "policy_version", "staleness"):
            self.assertIsInstance(out[k], self.Wrapped, k)
        self.assertEqual(out["group_ids"], ["g0", "g0", "g1"])


class BatchParsingTest(unittest.TestCase):
    def test_rejects_misaligned_tokens_naming_the_field(self):
        d = batch([[rollout("a", [1], [[10, 11]], [])]])
        d["groups"][0]["rollouts"][0]["tokens"]["logprobs"].pop()
        with self.assertRaises(RaasError) as cm:
            Batch.from_dict(d)
        self.assertEqual(cm.exception.code, "bad_batch")
        self.assertIn("batch.groups[0].rollouts[0].tokens", cm.exception.message)

    def test_keeps_unknown_rollout_fields(self):
        d = batch([[rollout("a", [1], [[10]], [])]])
        d["groups"][0]["rollouts"][0]["new_field"] = 7
        b = Batch.from_dict(d)
        self.assertEqual(b.rollouts[0].extra, {"new_field": 7})
        self.assertEqual(len(b), 1)


if __name__ == "__main__":
    unittest.main()


class SegmentsTest(unittest.TestCase):
    """A rollout of several sequences (an agent harness whose history was rewritten): one row each."""

    def sample(self) -> Batch:
        a = rollout("a", [1, 2, 3], [[10, 11], [12]], [[90, 91]], shaped=1.0)
        # Segment 1 branched off segment 0 after its first turn: its prompt is those 5 ids plus an observation.
        a["segments"] = [
            {**a["tokens"], "index": 0, "parent": None, "num_turns": 2, "weight_versions": ["1", "1"]},
            {"index": 1, "parent": {"segment": 0, "shared": 5}, "num_turns": 1, "weight_versions": ["1"],
             "prompt_ids": [1, 2, 3, 10, 11, 95], "response_ids": [13, 14], "response_mask": [1, 1], "logprobs": [-0.5, -0.25]},
        ]
        b = rollout("b", [1, 2, 3], [[20, 21]], [], shaped=-1.0, reward=0.0)
        return Batch.from_dict(batch([[a, b]]))

    def test_to_verl_has_a_row_per_segment_with_the_rollout_reward(self):
        out = to_verl(self.sample(), max_prompt_len=8, max_response_len=8, pad_id=PAD, segments="all")
        self.assertEqual(tolist(out["rollout_id"]), ["a", "a", "b"])
        self.assertEqual(tolist(out["segment_index"]), [0, 1, 0])
        self.assertEqual(tolist(out["uid"]), ["g0", "g0", "g0"])
        self.assertEqual(tolist(out["responses"])[1][:2], [13, 14])
        self.assertEqual(tolist(out["prompts"])[1][-6:], [1, 2, 3, 10, 11, 95])
        self.assertEqual(tolist(out["response_mask"])[1][:3], [1, 1, 0])
        scores = tolist(out["rm_scores"])
        self.assertEqual(scores[1][1], 1.0)  # the rollout's shaped reward, at the segment's last generated id
        self.assertAlmostEqual(tolist(out["rollout_log_probs"])[1][0], -0.5)

    def test_to_nemo_rl_has_a_row_per_segment(self):
        out = to_nemo_rl(self.sample(), segments="all")
        self.assertEqual(len(out["message_log"]), 3)
        seg = out["message_log"][1]
        self.assertEqual(tolist(seg[0]["token_ids"]), [1, 2, 3, 10, 11, 95])
        self.assertEqual(seg[1]["role"], "assistant")
        self.assertEqual(tolist(seg[1]["token_ids"]), [13, 14])
        self.assertEqual(tolist(out["total_reward"])[:2], [1.0, 1.0])
        self.assertEqual(out["group_ids"], [out["group_ids"][0]] * 3)

    def test_a_rollout_without_segments_keeps_its_one_row(self):
        self.assertEqual(len(Batch.from_dict(batch([[rollout("x", [1], [[2]], [])]])).rows("all")), 1)
        main = to_verl(self.sample(), max_prompt_len=8, max_response_len=8, pad_id=PAD)
        self.assertEqual(tolist(main["rollout_id"]), ["a", "b"])
        self.assertEqual(len(to_nemo_rl(self.sample())["message_log"]), 2)
