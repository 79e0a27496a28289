"""What veRL does with a rollout batch, re-expressed in torch and numpy from its source.

Sources: volcengine/verl at b178a3cd56f58b2d502255daba591e92833930a7 (``verl@b178a3cd``) and the
DAPO recipe, verl-project/verl-recipe at 48ea0a797fa29867ea0ad92aff7d284eec7d4be3
(``verl-recipe@48ea0a79``). Each function names the lines it follows; names and order of
operations are kept so a reader can compare them side by side."""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Dict, List, Sequence

import numpy as np
import torch


def tokenizer_pad(ids: Sequence[int], max_length: int, side: str, pad_id: int):
    """HF ``tokenizer.pad(padding="max_length")``: pads to ``max_length`` on ``side``; never truncates
    (a longer sequence keeps its length, and the agent loop's ``torch.cat`` of rows then fails)."""
    n = max(0, max_length - len(ids))
    ids = list(ids)
    if side == "left":
        return torch.tensor([[pad_id] * n + ids]), torch.tensor([[0] * n + [1] * len(ids)])
    return torch.tensor([ids + [pad_id] * n]), torch.tensor([[1] * len(ids) + [0] * n])


def compute_position_id_with_mask(mask: torch.Tensor) -> torch.Tensor:
    # verl@b178a3cd verl/utils/model.py:226-227
    return torch.clip(torch.cumsum(mask, dim=-1) - 1, min=0, max=None)


def tool_agent_loop_output(prompt_ids, response_ids, response_mask, response_logprobs, user_turns, assistant_turns,
                           response_length) -> Dict[str, Any]:
    """The ``AgentLoopOutput`` of ``ToolAgentLoop.run``: response lists cut at ``response_length``,
    ``num_turns = user_turns + assistant_turns + 1``."""
    # verl@b178a3cd verl/experimental/agent_loop/tool_agent_loop.py:196-205
    return {
        "prompt_ids": list(prompt_ids),
        "response_ids": list(response_ids)[:response_length],
        "response_mask": list(response_mask)[:response_length],
        "response_logprobs": list(response_logprobs)[:response_length] if response_logprobs else None,
        "num_turns": user_turns + assistant_turns + 1,
    }


def agent_loop_postprocess(output: Dict[str, Any], prompt_length: int, response_length: int, pad_id: int) -> Dict[str, Any]:
    """``AgentLoopWorker._agent_loop_postprocess`` for a text-only model (no processor)."""
    # verl@b178a3cd verl/experimental/agent_loop/agent_loop.py:546-556 (prompt: left padding)
    prompt_ids, prompt_attn = tokenizer_pad(output["prompt_ids"], prompt_length, "left", pad_id)
    # agent_loop.py:558-568 (response: right padding)
    response_ids, response_attn = tokenizer_pad(output["response_ids"], response_length, "right", pad_id)
    # agent_loop.py:570-578: the response mask padded like ids (pad value: the tokenizer's pad id)
    mask_ids, _ = tokenizer_pad(output["response_mask"], response_length, "right", pad_id)
    response_logprobs = None
    if output["response_logprobs"] is not None:
        # agent_loop.py:580-583
        pad_size = response_length - len(output["response_logprobs"])
        response_logprobs = torch.tensor(output["response_logprobs"] + [0.0] * pad_size).unsqueeze(0)
    # agent_loop.py:585-587
    response_mask = mask_ids * response_attn
    attention_mask = torch.cat([prompt_attn, response_attn], dim=1)
    input_ids = torch.cat([prompt_ids, response_ids], dim=1)
    # agent_loop.py:642-646 (no processor: empty multi-modal inputs) and 677-680
    multi_modal_inputs: Dict[str, Any] = {}
    position_ids = compute_position_id_with_mask(attention_mask)
    return {
        "prompts": prompt_ids, "responses": response_ids, "response_mask": response_mask, "input_ids": input_ids,
        "attention_mask": attention_mask, "position_ids": position_ids, "response_logprobs": response_logprobs,
        "multi_modal_inputs": multi_modal_inputs, "num_turns": output["num_turns"], "reward_score": output.get("reward_score"),
    }


def postprocess(inputs: List[Dict[str, Any]]) -> Dict[str, Any]:
    """``AgentLoopWorker._postprocess``: stacks rows; ``rm_scores`` holds each row's score at its
    last valid response position; ``__num_turns__`` and ``multi_modal_inputs`` go to the non-tensor part."""
    # verl@b178a3cd verl/experimental/agent_loop/agent_loop.py:734-742
    batch = {k: torch.cat([i[k] for i in inputs], dim=0)
             for k in ("prompts", "responses", "response_mask", "attention_mask", "input_ids", "position_ids")}
    if inputs[0]["response_logprobs"] is not None:
        batch["rollout_log_probs"] = torch.cat([i["response_logprobs"] for i in inputs], dim=0)
    scores = [i["reward_score"] for i in inputs]
    if all(s is not None for s in scores):
        # agent_loop.py:761-767
        prompt_length = batch["prompts"].size(1)
        response_length = batch["attention_mask"][:, prompt_length:].sum(dim=1) - 1
        rm_scores = torch.zeros_like(batch["response_mask"], dtype=torch.float32)
        rm_scores[torch.arange(batch["response_mask"].size(0)), response_length] = torch.tensor(scores, dtype=torch.float32)
        batch["rm_scores"] = rm_scores
    # agent_loop.py:769-771, 778-782
    non_tensor = {"__num_turns__": np.array([i["num_turns"] for i in inputs], dtype=np.int32)}
    mmi = [i["multi_modal_inputs"] for i in inputs]
    if any(m is not None for m in mmi):
        non_tensor["multi_modal_inputs"] = np.array(mmi, dtype=object)
    return {"batch": batch, "non_tensor_batch": non_tensor}


def images_seqlens(non_tensor_batch: Dict[str, Any]) -> List[int]:
    """``RayPPOTrainer.fit`` reads ``multi_modal_inputs`` unconditionally for every batch."""
    # verl@b178a3cd verl/trainer/ppo/ray_trainer.py:1459-1465
    images_seqlens_all: List[int] = []
    for multi_modal_input in non_tensor_batch["multi_modal_inputs"]:
        if "image_grid_thw" not in multi_modal_input.keys():
            continue
        images_seqlens_all.extend(multi_modal_input["images_seqlens"].tolist())
    return images_seqlens_all


def compute_grpo_outcome_advantage(token_level_rewards, response_mask, index, epsilon=1e-6, norm_adv_by_std_in_grpo=True):
    # verl@b178a3cd verl/trainer/ppo/core_algos.py:303-330
    scores = token_level_rewards.sum(dim=-1)
    id2score = defaultdict(list)
    id2mean = {}
    id2std = {}
    with torch.no_grad():
        bsz = scores.shape[0]
        for i in range(bsz):
            id2score[index[i]].append(scores[i])
        for idx in id2score:
            if len(id2score[idx]) == 1:
                id2mean[idx] = torch.tensor(0.0)
                id2std[idx] = torch.tensor(1.0)
            elif len(id2score[idx]) > 1:
                scores_tensor = torch.stack(id2score[idx])
                id2mean[idx] = torch.mean(scores_tensor)
                id2std[idx] = torch.std(scores_tensor)
            else:
                raise ValueError(f"no score in prompt index: {idx}")
        for i in range(bsz):
            if norm_adv_by_std_in_grpo:
                scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
            else:
                scores[i] = scores[i] - id2mean[index[i]]
        scores = scores.unsqueeze(-1) * response_mask
    return scores, scores


def compute_gae_returns(token_level_rewards, values, response_mask, gamma=1.0, lam=1.0):
    """``compute_gae_advantage_return`` before its final whitening: the returns (advantages + values)."""
    # verl@b178a3cd verl/trainer/ppo/core_algos.py:243-260
    with torch.no_grad():
        nextvalues = 0
        lastgaelam = 0
        advantages_reversed = []
        gen_len = token_level_rewards.shape[-1]
        for t in reversed(range(gen_len)):
            delta = token_level_rewards[:, t] + gamma * nextvalues - values[:, t]
            lastgaelam_ = delta + gamma * lam * lastgaelam
            # skip values and TD-error on observation tokens
            nextvalues = values[:, t] * response_mask[:, t] + (1 - response_mask[:, t]) * nextvalues
            lastgaelam = lastgaelam_ * response_mask[:, t] + (1 - response_mask[:, t]) * lastgaelam
            advantages_reversed.append(lastgaelam)
        advantages = torch.stack(advantages_reversed[::-1], dim=1)
        return advantages + values


def filter_groups(uids, metric_vals) -> List[int]:
    """DAPO's dynamic sampling: the rows of prompts whose metric varies (or that have one row)."""
    # verl-recipe@48ea0a79 dapo/dapo_ray_trainer.py:251-271
    prompt_uid2metric_vals = defaultdict(list)
    for uid, metric_val in zip(uids, metric_vals):
        prompt_uid2metric_vals[uid].append(metric_val)
    prompt_uid2metric_std = {}
    for prompt_uid, metric_vals in prompt_uid2metric_vals.items():
        prompt_uid2metric_std[prompt_uid] = np.std(metric_vals)
    kept_prompt_uids = [uid for uid, std in prompt_uid2metric_std.items() if std > 0 or len(prompt_uid2metric_vals[uid]) == 1]
    return [idx for idx, traj_from_prompt_uid in enumerate(uids) if traj_from_prompt_uid in kept_prompt_uids]


SAFETY_BOUND = 20.0  # verl@b178a3cd verl/trainer/ppo/rollout_corr_helper.py:75


def rollout_is_weights(old_log_prob, rollout_log_prob, response_mask, rollout_is="token", rollout_is_threshold=2.0):
    """Truncated IS weights π_old / π_rollout (``rollout_is``, ``rollout_is_threshold``), no batch normalisation."""
    # verl@b178a3cd verl/trainer/ppo/rollout_corr_helper.py:779 (log_ratio), 528-550 and 562 (weights)
    log_ratio = old_log_prob - rollout_log_prob
    if rollout_is == "token":
        weights = torch.exp(torch.clamp(log_ratio, min=-SAFETY_BOUND, max=SAFETY_BOUND))
    else:
        log_ratio_sum = (log_ratio * response_mask).sum(dim=-1).unsqueeze(-1)
        weights = torch.exp(torch.clamp(log_ratio_sum, min=-SAFETY_BOUND, max=SAFETY_BOUND)).expand_as(log_ratio)
    weights = weights * response_mask
    return weights.clamp(max=rollout_is_threshold)
