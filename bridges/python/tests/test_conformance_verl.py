"""to_verl against veRL's own code, on batches from a real raas run (tests/real_run.py).

veRL's agent loop, GRPO advantage, DAPO's filter_groups and its rollout importance sampling are
re-expressed in tests/reference_verl.py from volcengine/verl@b178a3cd and verl-recipe@48ea0a79;
each expectation names the lines it checks. Needs numpy and torch (python3-numpy, python3-torch)."""
from __future__ import annotations

import unittest

from tests.helpers import batch as hand_batch, rollout as hand_rollout
from tests.real_run import real_batches, require_built, require_torch

from raas_bridge import Batch, RaasError, split_verl, to_verl, verl_meta_info

PAD = 151643
R = 256  # above the run's max_response_tokens (120) plus its tool observations


def setUpModule() -> None:
    global torch, ref
    require_built()
    torch = require_torch()
    from tests import reference_verl as ref  # noqa: F811 (imports numpy and torch)


def turns_from_messages(r) -> "tuple[int, int]":
    """(user_turns, assistant_turns) as veRL's tool agent loop counts them: one user turn per block of
    observation messages between model turns, read from the messages (not from the mask)."""
    roles = [r.messages[s.message_index].role for s in sorted(r.tokens.spans, key=lambda s: s.start) if s.end > s.start]
    assistant = sum(1 for x in roles if x == "assistant")
    user = sum(1 for i, x in enumerate(roles) if x != "assistant" and (i == 0 or roles[i - 1] == "assistant"))
    return user, assistant


class RealBatch:
    """The run's batches, parsed, with the prompt length rounded up as a trainer would set it."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.raw = real_batches()
        cls.batches = [Batch.from_dict(d) for d in cls.raw]
        longest = max(len(r.tokens.prompt_ids) for b in cls.batches for r in b.rollouts)
        cls.P = (longest // 64 + 1) * 64


class AgentLoopTest(RealBatch, unittest.TestCase):
    def test_every_array_equals_what_veRLs_agent_loop_builds_from_the_same_rollout(self):
        for b in self.batches:
            out = to_verl(b, self.P, R, PAD, tensor=torch.as_tensor)
            rows = []
            for r in b.rollouts:
                user, assistant = turns_from_messages(r)
                self.assertEqual(assistant, r.num_turns)
                o = ref.tool_agent_loop_output(r.tokens.prompt_ids, r.tokens.response_ids, r.tokens.response_mask,
                                               r.tokens.logprobs, user, assistant, R)
                o["reward_score"] = r.shaped_reward
                rows.append(ref.agent_loop_postprocess(o, self.P, R, PAD))
            want = ref.postprocess(rows)
            # verl@b178a3cd verl/experimental/agent_loop/agent_loop.py:734-742 (tensor part), 580-587 (logprobs)
            for k in ("prompts", "responses", "response_mask", "input_ids", "attention_mask", "position_ids"):
                self.assertTrue(torch.equal(out[k], want["batch"][k]), k)
                self.assertEqual(out[k].dtype, want["batch"][k].dtype, k)
            self.assertTrue(torch.equal(out["rollout_log_probs"], want["batch"]["rollout_log_probs"]))
            self.assertEqual(out["rollout_log_probs"].dtype, torch.float32)
            # agent_loop.py:769-771 with tool_agent_loop.py:204 (user turns + assistant turns + 1)
            self.assertEqual(out["__num_turns__"].tolist(), want["non_tensor_batch"]["__num_turns__"].tolist())
            self.assertEqual(str(out["__num_turns__"].dtype), "int32")
            # agent_loop.py:642-646, 778-782: a text-only model gives one empty dict per row
            self.assertEqual(list(out["multi_modal_inputs"]), list(want["non_tensor_batch"]["multi_modal_inputs"]))
            # agent_loop.py:761-767 puts the score at the last valid response id; this run's
            # responses end with a model turn, where that is also the last generated id
            ends_generated = [r.tokens.response_mask[-1] == 1 for r in b.rollouts]
            self.assertTrue(all(ends_generated))
            self.assertTrue(torch.equal(out["rm_scores"], want["batch"]["rm_scores"]))

    def test_the_trainer_reads_multi_modal_inputs_without_error(self):
        _, non_tensors = split_verl(to_verl(self.batches[0], self.P, R, PAD))
        # verl@b178a3cd verl/trainer/ppo/ray_trainer.py:1459-1465 reads it for every batch
        self.assertEqual(ref.images_seqlens(non_tensors), [])

    def test_logprobs_are_the_backends_answers_aligned_with_their_ids(self):
        for b in self.batches:
            out = to_verl(b, self.P, R, PAD, tensor=torch.as_tensor)
            for i, r in enumerate(b.rollouts):
                mask = out["response_mask"][i].bool()
                said_ids = [t for m in r.messages if m.role == "assistant" and m.token_ids for t in m.token_ids]
                said_lps = [x for m in r.messages if m.role == "assistant" and m.logprobs for x in m.logprobs]
                self.assertEqual(out["responses"][i][mask].tolist(), said_ids)
                self.assertTrue(torch.allclose(out["rollout_log_probs"][i][mask], torch.tensor(said_lps, dtype=torch.float32)))
                self.assertTrue(torch.all(out["rollout_log_probs"][i][~mask] == 0))
            # on-policy (old = rollout logprobs) the truncated IS weights are 1 on every generated id, 0 elsewhere:
            # verl@b178a3cd verl/trainer/ppo/rollout_corr_helper.py:528-562
            w = ref.rollout_is_weights(out["rollout_log_probs"], out["rollout_log_probs"], out["response_mask"])
            self.assertTrue(torch.equal(w, out["response_mask"].float()))


class AdvantageTest(RealBatch, unittest.TestCase):
    def test_grpo_advantages_are_nonzero_exactly_where_rewards_differ_within_a_uid_group(self):
        for b in self.batches:
            out = to_verl(b, self.P, R, PAD, tensor=torch.as_tensor)
            self.assertEqual(len(set(out["uid"].tolist())), len(b.groups))
            # verl@b178a3cd verl/trainer/ppo/ray_trainer.py:178-190 → core_algos.py:267-330
            adv, _ = ref.compute_grpo_outcome_advantage(out["rm_scores"], out["response_mask"], out["uid"])
            nonzero_rows = 0
            for g in b.groups:
                rewards = [r.shaped_reward for r in g.rollouts]
                mean = sum(rewards) / len(rewards)
                for r in g.rollouts:
                    i = b.rollouts.index(r)
                    mask = out["response_mask"][i].bool()
                    self.assertTrue(torch.all(adv[i][~mask] == 0), "advantage outside the generated ids")
                    if abs(r.shaped_reward - mean) > 1e-6:
                        nonzero_rows += 1
                        self.assertTrue(torch.all(adv[i][mask] != 0), f"{r.job_id}: reward differs from its group, advantage 0")
                        # raas's own advantage is veRL's (docs/batch-format.md)
                        self.assertAlmostEqual(float(adv[i][mask][0]), r.advantage, places=4)
                    else:
                        self.assertTrue(torch.all(adv[i] == 0))
            self.assertGreater(nonzero_rows, 0)

    def test_dapo_filter_groups_keeps_every_group_raas_accepted(self):
        for b in self.batches:
            out = to_verl(b, self.P, R, PAD)
            # verl-recipe@48ea0a79 dapo/dapo_ray_trainer.py:238-271 with metric "acc" (or "score")
            for metric in ("acc", "score"):
                self.assertEqual(ref.filter_groups(out["uid"], out[metric]), list(range(len(b))), metric)

    def test_staleness_and_versions_reach_the_non_tensor_part(self):
        for b in self.batches:
            out = to_verl(b, self.P, R, PAD)
            self.assertEqual(out["policy_version"].tolist(), [r.policy_version for r in b.rollouts])
            self.assertEqual(out["staleness"].tolist(), [b.policy_version - r.policy_version for r in b.rollouts])
            meta = verl_meta_info(b, 0.8)
            # verl@b178a3cd verl/workers/actor/dp_actor.py:445 reads meta_info["temperature"]
            self.assertEqual(meta["temperature"], 0.8)


class TruncationTest(RealBatch, unittest.TestCase):
    def test_a_prompt_longer_than_max_prompt_len_is_an_error_by_default(self):
        b = self.batches[0]
        shortest = min(len(r.tokens.prompt_ids) for r in b.rollouts)
        P = shortest - 81
        # veRL's agent loop never cuts a prompt: tokenizer.pad keeps it whole
        # (verl@b178a3cd verl/experimental/agent_loop/agent_loop.py:547-553)
        ids, _ = ref.tokenizer_pad(b.rollouts[0].tokens.prompt_ids, P, "left", PAD)
        self.assertGreater(ids.shape[1], P)
        with self.assertRaises(RaasError) as cm:
            to_verl(b, P, R, PAD)
        self.assertEqual(cm.exception.code, "bad_request")
        self.assertIn(f"max_prompt_len={P}", cm.exception.message)

    def test_left_truncation_is_opt_in_and_leaves_a_warning_in_the_batch_stats(self):
        b = Batch.from_dict(self.raw[0])
        P = min(len(r.tokens.prompt_ids) for r in b.rollouts) - 81
        out = to_verl(b, P, R, PAD, truncation="left")
        self.assertEqual(b.stats["truncated_prompts"], len(b))
        self.assertTrue(any("cut the start" in w for w in b.stats["warnings"]))
        for i, r in enumerate(b.rollouts):
            self.assertEqual(out["prompts"][i].tolist(), r.tokens.prompt_ids[-P:])


class RewardPlacementTest(unittest.TestCase):
    """A rollout that ends with an observation: the reward sits on its last generated id, where every
    advantage estimator sees it (veRL's agent loop would put it on the observation's last id)."""

    def test_gae_sees_the_reward_on_the_last_generated_id(self):
        r = hand_rollout("x", [1, 2], [[10, 11], [12]], [[90], [91, 92]], shaped=1.0)
        b = Batch.from_dict(hand_batch([[r]]))
        out = to_verl(b, 4, 8, PAD, tensor=torch.as_tensor)
        mask = out["response_mask"]
        values = torch.zeros_like(out["rm_scores"])
        # verl@b178a3cd verl/trainer/ppo/core_algos.py:253-255 skip TD errors on observation ids
        returns = ref.compute_gae_returns(out["rm_scores"], values, mask)
        self.assertTrue(torch.all(returns[mask.bool()] == 1.0))
        # the agent loop's placement (agent_loop.py:764-766): the last valid id, an observation here
        last_valid = int(out["attention_mask"][0, 4:].sum()) - 1
        theirs = torch.zeros_like(out["rm_scores"])
        theirs[0, last_valid] = 1.0
        self.assertTrue(torch.all(ref.compute_gae_returns(theirs, values, mask)[mask.bool()] == 0.0))
        # GRPO sums the row, so both placements give it the same advantage (core_algos.py:303)
        self.assertEqual(float(out["rm_scores"].sum()), float(theirs.sum()))


if __name__ == "__main__":
    unittest.main()
