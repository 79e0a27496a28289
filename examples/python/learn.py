#!/usr/bin/env python3
"""A closed loop that learns: GRPO with truncated importance sampling on a tiny real policy, through raas.

    python3 examples/python/learn.py [--steps 12] [--seed 0] [--colocate drain|abort|none] [--selection none|history] [--metrics m.jsonl]

What runs (all on this machine, a CPU is enough):

- ``policy_server.py``: the policy, a softmax table over the digits and ``<|im_end|>`` (numpy),
  served with vLLM's token-in/token-out API; it samples, returns the ids and their logprobs, and
  reloads its table on ``POST /update_weights``.
- ``raas serve --handler learn_handler.mjs``: the rollout server with the task. Each prompt asks for
  one digit ("Reply with the digit 7."); the reward is 1 when the first generated token is that digit
  (a uniform policy earns about 1/11).
- ``raas sidecar`` (through ``RaasSidecar``): the DAPO coordinator, asynchronous with carry-over and
  ``max_staleness: 1``, so about half of each batch was sampled by the previous weights.

Each step: ``next_batch`` → ``to_verl`` → the GRPO loss as veRL computes it (advantages by ``uid``,
token-mean aggregation) with veRL's token-level truncated importance weights
``min(π_old / π_rollout, 2)`` against ``rollout_log_probs`` → one SGD step on the table → the new
table is saved and loaded by the policy server → ``update_weights``. With ``--colocate`` (default
``drain``) the step runs inside ``pause_generation`` / ``resume_generation``, as a co-located trainer
whose engines sleep while it trains. Nothing in raas improves the policy: only this trainer does.

It prints one line per step and, with ``--metrics``, writes them as JSON lines (with the rollouts
the step started, ``jobs_submitted``, and the prompts selection skipped). ``--selection history``
turns on raas's pre-rollout prompt selection (prompts whose recent groups all had equal rewards
are skipped with an adaptive probability). ``--require R`` exits 1 unless the mean reward of the
rollouts reached R by the last step.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from typing import Any, Dict, List, Optional

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bridges", "python"))  # or: pip install -e bridges/python

from raas_bridge import RaasSidecar, to_verl  # noqa: E402
from policy_server import DIGITS, SHAPE, action_index, log_softmax, state_of  # noqa: E402

PAD = 151643  # Qwen3's <|endoftext|>, the padding id veRL uses for it
MAX_PROMPT = 64
MAX_RESPONSE = 4  # max_tokens_per_turn: the first id is the answer, the rest is noise the loss also sees


def start(cmd: List[str], ready: str, what: str) -> "tuple[subprocess.Popen, str]":
    """Starts a server process and returns it with the URL of its first stdout line that has `ready`;
    its later stdout (raas serve logs there) is copied to our stderr, so the pipe never fills."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=None, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if ready in line:
            out = proc.stdout
            threading.Thread(target=lambda: [sys.stderr.write(f"[{what}] {ln}") for ln in out], daemon=True).start()
            return proc, line.strip().split(ready, 1)[1].split()[0]
    raise RuntimeError(f"{what} exited (code {proc.wait()}) before it listened: {' '.join(cmd)}")


def stop(proc: Optional[subprocess.Popen]) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def post(url: str, body: Dict[str, Any]) -> Dict[str, Any]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read() or b"{}")


def grpo_advantages(scores: np.ndarray, uids: List[str], eps: float = 1e-6) -> np.ndarray:
    """veRL's ``compute_grpo_outcome_advantage`` (norm_adv_by_std_in_grpo): (r - mean) / (std + eps)
    within each uid, std unbiased as torch.std; a group of one has mean 0 and std 1."""
    adv = np.zeros_like(scores)
    for uid in set(uids):
        idx = [i for i, u in enumerate(uids) if u == uid]
        s = scores[idx]
        mean, std = (0.0, 1.0) if len(idx) == 1 else (s.mean(), s.std(ddof=1))
        adv[idx] = (s - mean) / (std + eps)
    return adv


def train_step(table: np.ndarray, arrays: Dict[str, Any], lr: float, tis_cap: float) -> Dict[str, Any]:
    """One policy-gradient step on ``to_verl``'s arrays; returns the new table and what it saw.

    The loss is veRL's vanilla PPO loss with token-mean aggregation and rollout importance weights:
    ``-mean_t[min(π_old(t) / π_rollout(t), C) · A · ratio(t)]`` with ``ratio = π_θ / π_old``. With one
    update per batch θ = θ_old when the gradient is taken, so the clip is inactive and the gradient
    is ``-mean_t[w_t · A · ∇log π_θ(t)]``. π_old is this trainer's table (veRL's recomputed
    ``old_log_probs``), π_rollout the backend's logprobs of the ids it sampled.
    """
    prompts, responses = arrays["prompts"], arrays["responses"]
    mask, rollout_lp = arrays["response_mask"], arrays["rollout_log_probs"]
    scores = arrays["rm_scores"].sum(axis=1)
    adv = grpo_advantages(scores.astype(np.float64), list(arrays["uid"]))
    staleness = np.asarray(arrays["staleness"])
    grad = np.zeros_like(table)
    weights: List[float] = []
    fresh_dev = 0.0
    stale_w: List[float] = []
    tokens = int(mask.sum())
    for i in range(len(responses)):
        context = [int(t) for t in prompts[i] if t != PAD]
        for j in np.flatnonzero(mask[i]):
            s, token = state_of(context), int(responses[i, j])
            logp = log_softmax(table[s])
            a = action_index(token)
            w = float(np.exp(logp[a] - float(rollout_lp[i, j])))
            if staleness[i] == 0:
                fresh_dev = max(fresh_dev, abs(w - 1.0))
            else:
                stale_w.append(w)
            w = min(w, tis_cap)
            weights.append(w)
            g = -np.exp(logp)
            g[a] += 1.0  # ∇_row log softmax(row)[a]
            grad[s] += w * adv[i] * g
            context.append(token)
    new = table + lr * grad / max(tokens, 1)
    return {
        "table": new, "tokens": tokens,
        "is_weight_mean": float(np.mean(weights)) if weights else 1.0,
        "fresh_max_abs_is_dev": fresh_dev,
        "stale_rows": int((staleness > 0).sum()),
        "stale_is_weight_mean": float(np.mean(stale_w)) if stale_w else None,
        "stale_max_abs_is_dev": float(np.max(np.abs(np.asarray(stale_w) - 1.0))) if stale_w else None,
        "stale_truncated": int(sum(w > tis_cap for w in stale_w)),
    }


def policy_reward(table: np.ndarray) -> float:
    """The expected reward of a table: the mean over targets of P(first token = target)."""
    return float(np.mean([np.exp(log_softmax(table[d]))[d] for d in range(len(DIGITS))]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0, help="seeds the dataset order and every sample")
    ap.add_argument("--batch-size", type=int, default=8, help="groups per batch")
    ap.add_argument("--n", type=int, default=8, help="rollouts per group")
    ap.add_argument("--lr", type=float, default=50.0, help="SGD step on the logit table (token-mean loss)")
    ap.add_argument("--tis-cap", type=float, default=2.0, help="truncation of the importance weights (veRL's rollout_is_threshold)")
    ap.add_argument("--colocate", choices=["drain", "abort", "none"], default="drain",
                    help="run each training step inside pause_generation/resume_generation (none: generation continues)")
    ap.add_argument("--prompts", type=int, default=100, help="dataset size (prompt i asks for digit i mod 10)")
    ap.add_argument("--selection", choices=["none", "history"], default="none",
                    help="raas's pre-rollout prompt selection (selection.mode)")
    ap.add_argument("--metrics", help="write one JSON line per step here")
    ap.add_argument("--require", type=float, help="exit 1 unless the rollouts' mean reward reached this by the last step")
    args = ap.parse_args()

    cli = os.environ.get("RAAS_CLI") or os.path.join(ROOT, "dist", "src", "cli.js")
    node = os.environ.get("RAAS_NODE", "node")
    work = tempfile.mkdtemp(prefix="raas-learn-")
    policy = serve = None
    rs: Optional[RaasSidecar] = None
    rows: List[Dict[str, Any]] = []
    try:
        dataset = os.path.join(work, "digits.jsonl")
        with open(dataset, "w") as f:
            for i in range(args.prompts):
                f.write(json.dumps({"data_source": "digits", "instance_id": f"d{i}", "target": str(i % 10)}) + "\n")
        table = np.zeros(SHAPE)  # uniform: every digit and <|im_end|> at 1/11
        np.save(os.path.join(work, "table-0.npy"), table)
        policy, policy_url = start([sys.executable, os.path.join(HERE, "policy_server.py"), "--weights", os.path.join(work, "table-0.npy")],
                                   "policy server listening on ", "the policy server")
        serve, serve_url = start([node, cli, "serve", "--port", "0", "--handler", os.path.join(HERE, "learn_handler.mjs"),
                                  "--workers-run", "32", "--log-level", "warn"], "raas serve listening on ", "raas serve")
        config = {
            "name": "learn", "seed": args.seed, "servers": [{"url": serve_url}], "backends": [{"address": policy_url, "api": "vllm"}],
            "dataset": {"path": dataset}, "n": args.n, "batch_size": args.batch_size, "steps": args.steps,
            "mode": "async", "carry_over": True, "max_staleness": 1, "max_inflight_jobs": 32,
            "sampling_params": {"temperature": 1.0, "max_tokens_per_turn": MAX_RESPONSE, "seed": args.seed},
            "selection": {"mode": args.selection},
        }
        config_path = os.path.join(work, "learn.yaml")
        with open(config_path, "w") as f:
            json.dump(config, f)  # JSON is YAML
        rs = RaasSidecar(config_path)
        print(f"policy {policy_url}, rollout server {serve_url}; {args.batch_size} groups x {args.n} rollouts per step, "
              f"lr {args.lr}, truncated IS at {args.tis_cap}, colocate {args.colocate}, selection {args.selection}")
        t0 = time.monotonic()
        for step in range(args.steps):
            batch = rs.next_batch()
            arrays = to_verl(batch, MAX_PROMPT, MAX_RESPONSE, pad_id=PAD)

            def train_and_push() -> Dict[str, Any]:
                nonlocal table
                out = train_step(table, arrays, args.lr, args.tis_cap)
                table = out.pop("table")
                path = os.path.join(work, f"table-{batch.policy_version + 1}.npy")
                np.save(path, table)
                post(f"{policy_url}/update_weights", {"update_info": {"path": path}, "weight_version": str(batch.policy_version + 1)})
                # Only once the new table is served: calls labelled with the new version use it.
                rs.update_weights()
                return out

            if args.colocate == "none":
                seen = train_and_push()
            else:
                with rs.paused(args.colocate):
                    seen = train_and_push()
            stats = batch.stats
            row = {
                "step": batch.step, "policy_version": batch.policy_version,
                "mean_reward": stats["mean_reward"], "batch_mean_reward": stats.get("batch_mean_reward"),
                "policy_reward": policy_reward(table), "completed": stats["completed"], "accepted": stats["accepted"],
                "filtered": stats["filtered"], "rollouts": len(batch), "jobs_submitted": stats.get("jobs_submitted", 0),
                "skipped": stats.get("skipped", 0), **seen, "elapsed_s": round(time.monotonic() - t0, 2),
            }
            rows.append(row)
            stale = "-" if row["stale_is_weight_mean"] is None else f"{row['stale_is_weight_mean']:.3f}"
            print(f"step {row['step']:2d} v{row['policy_version']:<2d} mean reward {row['mean_reward']:.3f} "
                  f"(over {row['completed']} groups; {row['filtered']} filtered, {row['skipped']} skipped)  policy after the step {row['policy_reward']:.3f}  "
                  f"stale rows {row['stale_rows']:2d}/{row['rollouts']} (IS weight {stale}, {row['stale_truncated']} truncated)  "
                  f"fresh |w-1| {row['fresh_max_abs_is_dev']:.1e}  {row['elapsed_s']:.1f} s", flush=True)
    finally:
        code = rs.close() if rs is not None else 0
        stop(serve)
        stop(policy)
        shutil.rmtree(work, ignore_errors=True)
        if args.metrics:
            with open(args.metrics, "w") as f:
                for row in rows:
                    f.write(json.dumps(row) + "\n")
    if code != 0:
        print(f"the sidecar exited with code {code}", file=sys.stderr)
        return 1
    if args.require is not None and (not rows or rows[-1]["mean_reward"] < args.require):
        print(f"the mean reward did not reach {args.require}: {[round(r['mean_reward'], 3) for r in rows]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
