"""to_nemo_rl against NeMo RL's own code, on batches from a real raas run (tests/real_run.py).

NeMo RL's message-log flattening, loss masks, per-prompt baseline and std, GRPO advantage, dynamic
sampling (``select_indices``), overlong filtering and its importance weights are re-expressed in
tests/reference_nemo_rl.py from NVIDIA-NeMo/RL@7ea279ab; each expectation names the lines it
checks. Needs numpy and torch (python3-numpy, python3-torch)."""
from __future__ import annotations

import unittest

from tests.real_run import real_batches, require_built, require_torch

from raas_bridge import TRUNCATED_FINISH_REASONS, Batch, to_nemo_rl

PAD = 151643


def setUpModule() -> None:
    global torch, ref
    require_built()
    torch = require_torch()
    from tests import reference_nemo_rl as ref  # noqa: F811 (imports torch)


def others_mean(values, i):
    rest = [v for j, v in enumerate(values) if j != i]
    return sum(rest) / len(rest)


class NemoRlTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.batches = [Batch.from_dict(d) for d in real_batches()]

    def convert(self, b: Batch):
        return to_nemo_rl(b, tensor=torch.as_tensor)

    def test_flattened_log_is_the_whole_sequence_with_only_generated_ids_in_the_loss(self):
        for b in self.batches:
            out = self.convert(b)
            # RL@7ea279ab nemo_rl/algorithms/grpo.py:3150-3159: loss masks, then flattening
            ref.add_grpo_token_loss_masks_and_generation_logprobs(out["message_log"])
            flat, input_lengths = ref.batched_message_log_to_flat_message(out["message_log"], pad_value_dict={"token_ids": PAD})
            for i, r in enumerate(b.rollouts):
                t = r.tokens
                n = len(t.prompt_ids) + len(t.response_ids)
                self.assertEqual(int(input_lengths[i]), n)
                self.assertEqual(flat["token_ids"][i][:n].tolist(), t.prompt_ids + t.response_ids)
                self.assertTrue(torch.all(flat["token_ids"][i][n:] == PAD))
                # grpo.py:3169-3170: token_mask is token_loss_mask; every generated id and only those
                self.assertEqual(flat["token_loss_mask"][i][:n].tolist(), [0] * len(t.prompt_ids) + t.response_mask)
                self.assertEqual(int(flat["token_loss_mask"][i].sum()), sum(t.response_mask))
                # generation_logprobs: the backend's answers, aligned with the ids they belong to
                mask = flat["token_loss_mask"][i].bool()
                said_ids = [x for m in r.messages if m.role == "assistant" and m.token_ids for x in m.token_ids]
                said_lps = [x for m in r.messages if m.role == "assistant" and m.logprobs for x in m.logprobs]
                self.assertEqual(flat["token_ids"][i][mask].tolist(), said_ids)
                self.assertTrue(torch.allclose(flat["generation_logprobs"][i][mask], torch.tensor(said_lps, dtype=torch.float32)))
                self.assertTrue(torch.all(flat["generation_logprobs"][i][~mask] == 0))

    def test_length_is_the_prompt_length_so_rollouts_group_by_prompt(self):
        for b in self.batches:
            out = self.convert(b)
            # RL@7ea279ab nemo_rl/algorithms/grpo.py:3118-3128 cuts the initial prompt with `length`
            prompts = ref.prompt_ids_for_adv(out["message_log"], out["length"], PAD)
            distinct = {tuple(r.tokens.prompt_ids) for r in b.rollouts}
            self.assertEqual(len(distinct), len(b.groups), "the run's prompts are distinct")
            self.assertEqual(len(torch.unique(prompts, dim=0)), len(b.groups))
            rows = 0
            for g in b.groups:
                idx = list(range(rows, rows + len(g.rollouts)))
                rows += len(g.rollouts)
                self.assertEqual(len(torch.unique(prompts[idx], dim=0)), 1, g.group_id)

    def test_a_total_length_would_make_every_rollout_its_own_prompt_and_learn_nothing(self):
        b = self.batches[0]
        out = self.convert(b)
        whole = torch.tensor([len(r.tokens.prompt_ids) + len(r.tokens.response_ids) for r in b.rollouts])
        prompts = ref.prompt_ids_for_adv(out["message_log"], whole, PAD)
        # rollouts group only with identical twins (same prompt, same answer, same reward)
        sequences = {tuple(r.tokens.prompt_ids + r.tokens.response_ids) for r in b.rollouts}
        self.assertEqual(len(torch.unique(prompts, dim=0)), len(sequences))
        self.assertGreater(len(sequences), len(b.groups))
        adv = ref.grpo_advantage(prompts, out["total_reward"], torch.ones(len(b), 4))
        self.assertTrue(torch.all(adv == 0))

    def test_advantages_are_nonzero_exactly_where_a_reward_differs_from_its_leave_one_out_baseline(self):
        for b in self.batches:
            out = self.convert(b)
            ref.add_grpo_token_loss_masks_and_generation_logprobs(out["message_log"])
            flat, _ = ref.batched_message_log_to_flat_message(out["message_log"], pad_value_dict={"token_ids": PAD})
            prompts = ref.prompt_ids_for_adv(out["message_log"], out["length"], PAD)
            # grpo.py:3289-3292: mask = token_mask * sample_mask; default use_leave_one_out_baseline and normalize_rewards
            mask = flat["token_loss_mask"] * out["loss_multiplier"].unsqueeze(-1)
            adv = ref.grpo_advantage(prompts, out["total_reward"], mask) * mask
            nonzero = 0
            rows = 0
            for g in b.groups:
                shaped = [r.shaped_reward for r in g.rollouts]
                for k, r in enumerate(g.rollouts):
                    i = rows + k
                    in_loss = mask[i].bool()
                    self.assertTrue(torch.all(adv[i][~in_loss] == 0))
                    if abs(shaped[k] - others_mean(shaped, k)) > 1e-6:
                        nonzero += 1
                        self.assertTrue(torch.all(adv[i][in_loss] != 0), r.job_id)
                    else:
                        self.assertTrue(torch.all(adv[i] == 0), r.job_id)
                rows += len(g.rollouts)
            self.assertGreater(nonzero, len(b) // 2)

    def test_dynamic_sampling_selects_rows_with_the_task_rewards_std(self):
        for b in self.batches:
            out = self.convert(b)
            prompts = ref.prompt_ids_for_adv(out["message_log"], out["length"], PAD)
            # grpo.py:3046-3050: with use_dynamic_sampling the std is taken on unshaped_total_reward
            baseline, std = ref.calculate_baseline_and_std_per_prompt(
                prompts, out["total_reward"], torch.ones(len(b)), std_rewards=out["unshaped_total_reward"])
            # grpo.py:1754-1762 → batched_data_dict.py:1047-1060: every key a tensor or a list
            kept = ref.dynamic_sampling(dict(out), std, baseline)
            self.assertEqual(kept["group_ids"], [out["group_ids"][i] for i in range(len(b)) if std[i] != 0])
            # The std is leave-one-out: a row is dropped when the *other* rollouts' task rewards are
            # equal (the odd one out of [1, 1, 1, 0]); raas already drops groups whose rewards are all equal.
            rows = 0
            for g in b.groups:
                task = [r.reward for r in g.rollouts]
                for k in range(len(task)):
                    rest = task[:k] + task[k + 1:]
                    self.assertEqual(bool(std[rows + k] != 0), len(set(rest)) > 1, g.group_id)
                rows += len(g.rollouts)
        with self.assertRaises(TypeError):  # what the bridge's numpy object array of group ids did
            import numpy as np
            ref.select_indices({"group_ids": np.array(["g0", "g1"], dtype=object)}, [0])

    def test_overlong_filtering_zeroes_exactly_the_truncated_rollouts(self):
        seen = 0
        for b in self.batches:
            out = self.convert(b)
            self.assertEqual(out["truncated"].dtype, torch.bool)
            ref.overlong_filtering(out)
            for i, r in enumerate(b.rollouts):
                cut = r.finish_reason in TRUNCATED_FINISH_REASONS
                seen += cut
                self.assertEqual(float(out["loss_multiplier"][i]), 0.0 if cut else 1.0, r.job_id)
        self.assertGreater(seen, 0, "the run truncates some rollouts (max_response_tokens)")

    def test_rewards_versions_and_importance_weights(self):
        shaped_differs = 0
        for b in self.batches:
            out = self.convert(b)
            # total_reward is shaped once, by raas; unshaped_total_reward is what NeMo RL's own
            # reward shaping would have kept (RL@7ea279ab nemo_rl/algorithms/reward_functions.py:64)
            self.assertTrue(torch.allclose(out["total_reward"], torch.tensor([r.shaped_reward for r in b.rollouts])))
            self.assertTrue(torch.equal(out["unshaped_total_reward"], torch.tensor([float(r.reward) for r in b.rollouts])))
            shaped_differs += sum(r.shaped_reward != r.reward for r in b.rollouts)
            self.assertEqual(out["policy_version"].tolist(), [r.policy_version for r in b.rollouts])
            self.assertEqual(out["staleness"].tolist(), [b.policy_version - r.policy_version for r in b.rollouts])
            ref.add_grpo_token_loss_masks_and_generation_logprobs(out["message_log"])
            flat, _ = ref.batched_message_log_to_flat_message(out["message_log"], pad_value_dict={"token_ids": PAD})
            gen = flat["generation_logprobs"]
            # loss_functions.py:577-616 with truncated_importance_sampling_type "tis", ratio 2.0
            self.assertTrue(torch.all(ref.actor_importance_weights(gen, gen, 2.0) == 1.0))
            drifted = gen + 1.0 * flat["token_loss_mask"]
            w = ref.actor_importance_weights(drifted, gen, 2.0)
            self.assertTrue(torch.all(w[flat["token_loss_mask"].bool()] == 2.0))
        self.assertGreater(shaped_differs, 0, "the run shapes some rewards (overlong)")


if __name__ == "__main__":
    unittest.main()
