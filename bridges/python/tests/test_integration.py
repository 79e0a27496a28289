"""RaasSidecar on an embedded config (rollout server and simulated backends inside the sidecar):
three steps of next_batch + update_weights, token views checked, and no process left behind."""
from __future__ import annotations

import io
import os
import time
import unittest

from tests.helpers import CLI, DEMO, NODE, ROOT

from raas_bridge import RaasSidecar, to_nemo_rl, to_verl

FALLBACK = os.path.join(ROOT, "test", "sidecar", "fixtures", "embedded.yaml")


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
    config = DEMO if os.path.exists(DEMO) else FALLBACK

    def test_three_steps_then_close_leaves_no_process(self):
        events = []
        rs = RaasSidecar(self.config, command=[NODE, CLI, "sidecar", "--config", self.config, "--progress-interval-s", "0.2"],
                         log_stream=io.StringIO(), on_event=events.append)
        with rs:
            info = rs.info
            for step in range(3):
                b = rs.next_batch(timeout_s=90)
                self.assertEqual(b.step, step)
                self.assertEqual(len(b.groups), info["batch_size"])
                for g in b.groups:
                    self.assertEqual(len(g.rollouts), info["group_size"])
                    for r in g.rollouts:
                        t = r.tokens
                        self.assertEqual(len(t.response_mask), len(t.response_ids))
                        if r.messages is not None and t.spans:
                            for s in t.spans:
                                m = r.messages[s.message_index]
                                if m.role == "assistant":
                                    self.assertEqual(m.token_ids, t.response_ids[s.start:s.end])
                                    self.assertTrue(all(t.response_mask[s.start:s.end]))
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
        self.assertEqual(rs.close(), 0)
        deadline = time.time() + 10
        while time.time() < deadline and (alive(pid) or any(alive(p) for p in started)):
            time.sleep(0.05)
        self.assertFalse(alive(pid))
        self.assertEqual([p for p in started if alive(p)], [])


if __name__ == "__main__":
    unittest.main()
