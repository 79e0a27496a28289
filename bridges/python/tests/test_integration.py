"""RaasSidecar on an embedded config (rollout server and simulated backends inside the sidecar):
three steps of next_batch + update_weights, token views checked, and no process left behind.

The default config is test/sidecar/fixtures/embedded.yaml (cheap multi-turn chat tasks, so the
suite stays within its time share); RAAS_BRIDGE_IT_CONFIG=configs/demo.yaml runs the same test on
the demo config, which examples/python/train_loop.py also drives in CI."""
from __future__ import annotations

import io
import os
import time
import unittest

from tests.helpers import CLI, NODE, ROOT

from raas_bridge import RaasSidecar, to_nemo_rl, to_verl

FALLBACK = os.path.join(ROOT, "test", "sidecar", "fixtures", "embedded.yaml")  # see the module docstring


def descendants(pid: int) -> set:
    """Every live process under ``pid`` (from /proc)."""
    children: dict = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.add(c)
            todo.append(c)
    return out


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@unittest.skipUnless(os.path.exists(CLI), "dist/src/cli.js is not built (npm run build)")
class EmbeddedIntegrationTest(unittest.TestCase):
    config = os.path.join(ROOT, os.environ["RAAS_BRIDGE_IT_CONFIG"]) if os.environ.get("RAAS_BRIDGE_IT_CONFIG") else FALLBACK

    def test_three_steps_then_close_leaves_no_process(self):
        events = []
        rs = RaasSidecar(self.config, command=[NODE, CLI, "sidecar", "--config", self.config, "--return-messages",
                                  "--progress-interval-s", "0.2", "--close-timeout-s", "120", "--no-outputs"],
                         log_stream=io.StringIO(), on_event=events.append)
        with rs:
            info = rs.info
            for step in range(3):
                b = rs.next_batch(timeout_s=300)
                self.assertEqual(b.step, step)
                self.assertEqual(len(b.groups), info["batch_size"])
                for g in b.groups:
                    self.assertEqual(len(g.rollouts), info["group_size"])
                    for r in g.rollouts:
                        t = r.tokens
                        self.assertEqual(len(t.response_mask), len(t.response_ids))
                        # the ids the backend answered (kept on assistant messages) are the
                        # model-generated ids of the training view, span by span
                        self.assertIsNotNone(r.messages)
                        self.assertTrue(t.spans)
                        assistant = [s for s in t.spans if r.messages[s.message_index].role == "assistant"]
                        self.assertEqual(len(assistant), r.num_turns)
                        for s in assistant:
                            m = r.messages[s.message_index]
                            self.assertEqual(m.token_ids, t.response_ids[s.start:s.end])
                            self.assertEqual(m.logprobs, t.logprobs[s.start:s.end])
                            self.assertTrue(all(t.response_mask[s.start:s.end]))
                        covered = sum(s.end - s.start for s in t.spans)
                        self.assertEqual(covered, len(t.response_ids))
                verl = to_verl(b, max_prompt_len=512, max_response_len=1024, pad_id=151643)
                nemo = to_nemo_rl(b)
                self.assertEqual(len(verl["uid"]), len(b))
                for i, log in enumerate(nemo["message_log"]):
                    ids = [int(x) for m in log for x in m["token_ids"]]
                    row = [int(x) for x in verl["input_ids"][i]]
                    attn = [int(x) for x in verl["attention_mask"][i]]
                    self.assertEqual(ids, [x for x, a in zip(row, attn) if a])
                self.assertEqual(rs.update_weights()["policy_version"], step + 1)
            pid = rs.pid
            started = descendants(pid)
        self.assertEqual(rs.close(timeout_s=150), 0)
        deadline = time.time() + 10
        while time.time() < deadline and (alive(pid) or any(alive(p) for p in started)):
            time.sleep(0.05)
        self.assertFalse(alive(pid))
        self.assertEqual([p for p in started if alive(p)], [])


if __name__ == "__main__":
    unittest.main()
