"""What NeMo RL's GRPO does with a rollout batch, re-expressed in torch from its source.

Source: NVIDIA-NeMo/RL at 7ea279abfbeb698b092856d0dab61e7cf39bc909 (``RL@7ea279ab``). Each
function names the lines it follows; multimodal ``PackedTensor`` paths and router replay, which a
text batch never takes, are left out."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

import torch
from torch import Tensor


def message_log_to_flat_messages(message_log: List[Dict[str, Any]]) -> Dict[str, Any]:
    # RL@7ea279ab nemo_rl/data/llm_message_utils.py:105-147 (tensors concatenated, other values listed)
    result: Dict[str, List[Any]] = {}
    if len(message_log) == 0:
        return result
    all_keys = set()
    for msg in message_log:
        all_keys.update(msg.keys())
    for key in all_keys:
        result[key] = []
    for msg in message_log:
        for key in all_keys:
            if key in msg:
                result[key].append(msg[key])
    concat = {}
    for key in result:
        if result[key] and isinstance(result[key][0], Tensor):
            concat[key] = torch.cat(result[key])
    return {**result, **concat}


def _pad_tensor(tensor: Tensor, max_len: int, pad_side: str, pad_value: int = 0) -> Tensor:
    # RL@7ea279ab nemo_rl/data/llm_message_utils.py:202-231
    pad_len = max_len - tensor.size(0)
    if pad_len <= 0:
        return tensor
    padding = torch.full((pad_len, *tensor.shape[1:]), pad_value, dtype=tensor.dtype, device=tensor.device)
    return torch.cat([padding, tensor] if pad_side == "left" else [tensor, padding], dim=0)


def _validate_tensor_consistency(tensors: List[Tensor]) -> None:
    # RL@7ea279ab nemo_rl/data/llm_message_utils.py:234-254
    if not tensors:
        return
    first = tensors[0]
    if not all(t is None or t.dtype == first.dtype for t in tensors):
        raise RuntimeError(f"expected consistent types but got: {[t.dtype for t in tensors]}")


def batched_message_log_to_flat_message(message_log_batch, pad_value_dict: Optional[Dict[str, int]] = None,
                                        make_sequence_length_divisible_by: int = 1):
    # RL@7ea279ab nemo_rl/data/llm_message_utils.py:328-431
    sequenced_lists = [message_log_to_flat_messages(ml) for ml in message_log_batch]
    all_keys = {k for seq in sequenced_lists for k in seq}
    max_len = 0
    for seq in sequenced_lists:
        for value in seq.values():
            if isinstance(value, Tensor):
                max_len = max(max_len, value.size(0))
    if max_len % make_sequence_length_divisible_by != 0:
        max_len = ((max_len // make_sequence_length_divisible_by) + 1) * make_sequence_length_divisible_by
    input_lengths = [max((v.size(0) for v in seq.values() if isinstance(v, Tensor)), default=0) for seq in sequenced_lists]
    result: Dict[str, Any] = {}
    for key in all_keys:
        values = [seq.get(key) for seq in sequenced_lists]
        if not values or not isinstance(values[0], Tensor):
            result[key] = values
            continue
        tensors = [t for t in values if t is not None]
        _validate_tensor_consistency(tensors)
        filled = [torch.zeros(0, dtype=tensors[0].dtype) if v is None else v for v in values]
        pad_value = pad_value_dict.get(key, 0) if pad_value_dict else 0
        result[key] = torch.stack([_pad_tensor(t, max_len, "right", pad_value) for t in filled])
    return result, torch.tensor(input_lengths, dtype=torch.int32)


def add_grpo_token_loss_masks_and_generation_logprobs(message_logs) -> None:
    # RL@7ea279ab nemo_rl/algorithms/grpo.py:1929-1942: only generated assistant messages (those with
    # generation_logprobs) are in the loss; every other message gets zero logprobs
    for message_log in message_logs:
        for message in message_log:
            role = message["role"]
            token_ids = message["token_ids"]
            if role == "assistant" and "generation_logprobs" in message:
                message["token_loss_mask"] = torch.ones_like(token_ids)
            else:
                message["token_loss_mask"] = torch.zeros_like(token_ids)
            if "generation_logprobs" not in message:
                message["generation_logprobs"] = torch.zeros_like(token_ids, dtype=torch.float32)


def extract_initial_prompt_messages(message_logs: list, original_prompt_lengths: Tensor) -> list:
    # RL@7ea279ab nemo_rl/algorithms/grpo.py:1893-1907
    initial_prompt_message_logs = []
    for i, message_log in enumerate(message_logs):
        initial_prompt_log = []
        cumulative_length = 0
        target_length = original_prompt_lengths[i].item()
        for message in message_log:
            if cumulative_length >= target_length:
                break
            initial_prompt_log.append(message)
            cumulative_length += len(message["token_ids"])
        initial_prompt_message_logs.append(initial_prompt_log)
    return initial_prompt_message_logs


def prompt_ids_for_adv(message_log, length, pad_id: int) -> Tensor:
    """The prompt ids GRPO groups rollouts by."""
    # RL@7ea279ab nemo_rl/algorithms/grpo.py:3118-3128
    initial = extract_initial_prompt_messages(message_log, length)
    flat, _ = batched_message_log_to_flat_message(initial, pad_value_dict={"token_ids": pad_id})
    return flat["token_ids"]


def calculate_baseline_and_std_per_prompt(prompts: Tensor, rewards: Tensor, valid_mask: Tensor,
                                          leave_one_out_baseline: bool = True, std_rewards: Optional[Tensor] = None):
    # RL@7ea279ab nemo_rl/algorithms/utils.py:130-197
    if std_rewards is None:
        std_rewards = rewards
    unique_prompts = torch.unique(prompts, dim=0)
    baseline = torch.zeros_like(rewards)
    sq_baseline = torch.zeros_like(rewards)
    std = torch.zeros_like(rewards)
    for i in range(len(unique_prompts)):
        is_matching_prompt = (prompts == unique_prompts[i]).all(1)
        prompt_idx = torch.arange(len(prompts))[is_matching_prompt]
        if leave_one_out_baseline:
            baseline_mask_matrix = 1 - torch.eye(len(prompt_idx))
        else:
            baseline_mask_matrix = torch.ones((len(prompt_idx), len(prompt_idx)))
        if valid_mask[prompt_idx].sum() <= 1:
            baseline[prompt_idx] = rewards[prompt_idx]
        else:
            num_valid = valid_mask[prompt_idx].float().sum() - int(leave_one_out_baseline)
            prompt_baseline = torch.matmul(baseline_mask_matrix, rewards[prompt_idx] * valid_mask[prompt_idx]) / num_valid
            std_prompt_baseline = (
                prompt_baseline if std_rewards is rewards
                else torch.matmul(baseline_mask_matrix, std_rewards[prompt_idx] * valid_mask[prompt_idx]) / num_valid
            )
            std_prompt_baseline_square = torch.matmul(baseline_mask_matrix, torch.pow(std_rewards[prompt_idx], 2) * valid_mask[prompt_idx]) / num_valid
            baseline[prompt_idx] = prompt_baseline
            sq_baseline[prompt_idx] = std_prompt_baseline_square
            std[prompt_idx] = ((std_prompt_baseline_square - std_prompt_baseline.square()) * (num_valid / (num_valid - 1))).sqrt().nan_to_num(0)
    return baseline, std


def grpo_advantage(prompt_ids: Tensor, rewards: Tensor, mask: Tensor, use_leave_one_out_baseline=True, normalize_rewards=True) -> Tensor:
    # RL@7ea279ab nemo_rl/algorithms/advantage_estimator.py:82-98 (GRPOAdvantageEstimator.compute_advantage)
    baseline, std = calculate_baseline_and_std_per_prompt(prompt_ids, rewards, torch.ones_like(rewards),
                                                          leave_one_out_baseline=use_leave_one_out_baseline)
    advantages = (rewards - baseline).unsqueeze(-1)
    if normalize_rewards:
        epsilon = 1e-6
        non_zero_std_mask = std > 0
        advantages[non_zero_std_mask] = advantages[non_zero_std_mask] / (std.unsqueeze(-1)[non_zero_std_mask] + epsilon)
    return advantages.expand(mask.shape)


def select_indices(data: Dict[str, Any], indices: Union[List[int], Tensor]) -> Dict[str, Any]:
    # RL@7ea279ab nemo_rl/distributed/batched_data_dict.py:1047-1060 (BatchedDataDict.select_indices)
    selected = {}
    for k, v in data.items():
        if torch.is_tensor(v):
            selected[k] = v[indices]
        elif isinstance(v, list):
            selected[k] = [v[i] for i in indices]
        else:
            raise TypeError(f"Unsupported type {type(v)} for index selection in BatchedDataDict")
    return selected


def dynamic_sampling(repeated_batch: Dict[str, Any], std: Tensor, baseline: Tensor) -> Dict[str, Any]:
    """``dynamic_sampling`` with ``use_dynamic_sampling``: keeps the rows whose prompt's std is not 0."""
    # RL@7ea279ab nemo_rl/algorithms/grpo.py:1742-1769
    repeated_batch["baseline"] = baseline
    repeated_batch["std"] = std
    total_rewards = repeated_batch["total_reward"]
    non_zero_std_mask = std != 0.0
    keep_prompt_indices = torch.arange(len(non_zero_std_mask))[non_zero_std_mask].tolist()
    filtered = select_indices(repeated_batch, keep_prompt_indices)
    filtered["std"] = std[keep_prompt_indices]
    filtered["baseline"] = baseline[keep_prompt_indices]
    filtered_rewards = filtered["total_reward"]
    filtered["total_reward"] = total_rewards
    filtered["filtered_reward"] = filtered_rewards
    return filtered


def overlong_filtering(repeated_batch: Dict[str, Any]) -> None:
    # RL@7ea279ab nemo_rl/algorithms/grpo.py:3136-3145 (grpo.overlong_filtering)
    loss_multiplier = repeated_batch["loss_multiplier"].clone()
    truncated = repeated_batch["truncated"]
    if isinstance(truncated, list):
        truncated = torch.tensor(truncated, dtype=torch.bool)
    loss_multiplier[truncated] = 0
    repeated_batch["loss_multiplier"] = loss_multiplier


def actor_importance_weights(prev_logprobs: Tensor, generation_logprobs: Tensor, tis_ratio: float, tis_min: Optional[float] = None) -> Tensor:
    """Token-level off-policy correction with ``truncated_importance_sampling_type: tis``."""
    # RL@7ea279ab nemo_rl/algorithms/loss/loss_functions.py:577-583 and 596-616
    w = torch.exp(prev_logprobs - generation_logprobs)
    w = torch.nan_to_num(w, nan=0.0, posinf=0.0, neginf=0.0)
    if tis_min is None:
        tis_min = 0.0
    return torch.clamp(w, min=tis_min, max=tis_ratio)
