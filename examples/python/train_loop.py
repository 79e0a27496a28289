#!/usr/bin/env python3
"""A trainer loop on raas through the Python bridge alone: three steps of next_batch + update_weights
against the embedded demo config (a local rollout server and simulated backends in the sidecar).

    python3 examples/python/train_loop.py [configs/demo.yaml] [--steps 3]

Where a real trainer computes the loss and syncs weights to its inference servers, this one only
builds the veRL and NeMo RL views and prints what it would train on.
"""
from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bridges", "python"))  # or: pip install -e bridges/python

from raas_bridge import RaasError, RaasSidecar, rollout_metrics, to_nemo_rl, to_verl  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", nargs="?", default=os.path.join(ROOT, "configs", "demo.yaml"))
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--max-prompt-len", type=int, default=1024)
    ap.add_argument("--max-response-len", type=int, default=2048)
    args = ap.parse_args()

    def on_event(ev: dict) -> None:
        if ev["event"] == "warning":
            print(f"[sidecar warning] {ev['data']['message']}", file=sys.stderr)

    try:
        rs = RaasSidecar(args.config, on_event=on_event)
    except RaasError as e:
        print(f"raas error {e.code}: {e.message}", file=sys.stderr)
        return 1
    try:
        print(f"raas {rs.info['raas_version']}: batch_size={rs.info['batch_size']} group_size={rs.info['group_size']}")
        for _ in range(args.steps):
            batch = rs.next_batch()
            # veRL: DataProto.from_dict(*split_verl(to_verl(..., tensor=torch.as_tensor)))
            verl = to_verl(batch, args.max_prompt_len, args.max_response_len, pad_id=151643)
            # NeMo RL: message logs with token_ids and generation_logprobs, plus rewards
            nemo = to_nemo_rl(batch)
            rewards = [r.shaped_reward for r in batch.rollouts]
            generated = sum(int(sum(row)) for row in verl["response_mask"])
            print(
                f"step {batch.step}: policy v{batch.policy_version}, {len(batch.groups)} groups, {len(batch)} rollouts, "
                f"{generated} generated tokens, mean reward {sum(rewards) / len(rewards):.3f}, "
                f"{len(nemo['message_log'])} message logs"
            )
            # Your tracker: veRL's Tracking.log(data=metrics, step=...), NeMo RL's log_metrics(..., prefix="rollout")
            m = rollout_metrics(batch)
            print(
                f"  rollout/groups/informative_share {m['rollout/groups/informative_share']:.2f}, "
                f"rollout/timing_s/run {m['rollout/timing_s/run']:.2f}, rollout/waste/fraction {m['rollout/waste/fraction']:.2f}"
            )
            # ... the optimizer step and the weight sync to the inference servers go here ...
            v = rs.update_weights()["policy_version"]
            print(f"  weights updated: policy_version {v}")
    except RaasError as e:
        print(f"raas error {e.code}: {e.message}", file=sys.stderr)
        rs.close()
        return 1
    code = rs.close()
    if code != 0:
        print(f"the sidecar exited with code {code} (see its log above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
