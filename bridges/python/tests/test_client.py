"""RaasSidecar against a real sidecar process (the scripted backend: no servers needed)."""
from __future__ import annotations

import io
import json
import os
import time
import unittest

from tests.helpers import NODE, SCRIPTED

from raas_bridge import Batch, RaasError, RaasSidecar, to_nemo_rl, to_verl


def scripted(**env: str) -> RaasSidecar:
    return RaasSidecar(command=[NODE, SCRIPTED], env=env, log_stream=io.StringIO())


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


class ClientTest(unittest.TestCase):
    def test_three_steps_and_adapters(self):
        with scripted(SCRIPTED_OPTIONS=json.dumps({"batch_size": 2, "n": 3})) as rs:
            self.assertEqual(rs.info["batch_size"], 2)
            self.assertEqual(rs.info["group_size"], 3)
            self.assertEqual(rs.status(), {"state": "idle"})
            for step in range(3):
                b = rs.next_batch(timeout_s=10)
                self.assertIsInstance(b, Batch)
                self.assertEqual((b.step, b.policy_version, len(b)), (step, step, 6))
                for r in b.rollouts:
                    gen = [t for t, m in zip(r.tokens.response_ids, r.tokens.response_mask) if m]
                    said = [t for m in r.messages if m.role == "assistant" for t in m.token_ids]
                    self.assertEqual(gen, said)
                v = to_verl(b, 32, 64, 0)
                self.assertEqual(len(v["uid"]), 6)
                self.assertEqual(len(to_nemo_rl(b)["message_log"]), 6)
                self.assertEqual(rs.update_weights(weight_version=f"w{step + 1}"), {"policy_version": step + 1})
            steps = [(b.step, rs.update_weights()["policy_version"]) for b in rs.batches(2)]
            self.assertEqual(steps, [(3, 4), (4, 5)])
            state = rs.checkpoint()
            self.assertEqual(state, {"step": 5, "policy_version": 5})
            self.assertEqual(rs.resume(state)["resumed"], True)
            self.assertEqual(rs.next_batch().step, 5)
            self.assertEqual(rs.eval(n=4)["n"], 4)
            pid = rs.pid
        self.assertTrue(gone(pid))
        self.assertEqual(rs.close(), 0)  # closing twice is fine and returns the exit code

    def test_bad_lines_and_unknown_ops(self):
        with scripted() as rs:
            with self.assertRaises(RaasError) as cm:
                rs.request("frobnicate")
            self.assertEqual(cm.exception.code, "unknown_op")
            with self.assertRaises(RaasError) as cm:
                rs.request("next_batch", timeout_s="soon")
            self.assertEqual(cm.exception.code, "bad_request")
            self.assertIn("timeout_s", cm.exception.message)
            # a line the sidecar cannot read is answered with id null; it keeps serving
            rs._proc.stdin.write(b"{not json\n")
            rs._proc.stdin.flush()
            with self.assertRaises(RaasError) as cm:
                rs.status()
            self.assertEqual(cm.exception.code, "parse_error")
            self.assertEqual(rs.status(), {"state": "idle"})

    def test_timeout_is_answered_with_its_code(self):
        with scripted(SCRIPTED_OPTIONS=json.dumps({"delay_ms": None})) as rs:
            with self.assertRaises(RaasError) as cm:
                rs.next_batch(timeout_s=0.2)
            self.assertEqual(cm.exception.code, "timeout")

    def test_close_from_another_thread_cancels_a_waiting_next_batch(self):
        import threading
        rs = scripted(SCRIPTED_OPTIONS=json.dumps({"delay_ms": None}))
        errors = []

        def wait():
            try:
                rs.next_batch()
            except RaasError as e:
                errors.append(e.code)

        th = threading.Thread(target=wait)
        th.start()
        while not rs._lock.locked():  # the request holds the lock from just before it is sent
            time.sleep(0.01)
        time.sleep(0.2)
        self.assertEqual(rs.close(timeout_s=30), 0)
        th.join(timeout=30)
        self.assertEqual(errors, ["cancelled"])
        self.assertTrue(gone(rs.pid))

    def test_eof_without_shutdown_exits_0_and_leaves_no_process(self):
        rs = scripted(SCRIPTED_OPTIONS=json.dumps({"delay_ms": None}))
        rs._send({"id": "b", "op": "next_batch"})
        time.sleep(0.1)
        rs._proc.stdin.close()
        self.assertEqual(rs._proc.wait(timeout=20), 0)
        self.assertTrue(gone(rs.pid))
        rs.close()

    def test_events_reach_on_event(self):
        seen = []
        rs = RaasSidecar(command=[NODE, SCRIPTED], env={"SCRIPTED_STRAY": "1"}, log_stream=None, on_event=seen.append)
        with rs:
            rs.status()
        self.assertEqual([e["event"] for e in seen], ["warning"])
        self.assertIn("stdout", seen[0]["data"]["message"])

    def test_bad_config_raises_at_construction_with_its_code(self):
        with self.assertRaises(RaasError) as cm:
            scripted(SCRIPTED_FATAL="1")
        self.assertEqual(cm.exception.code, "config_invalid")
        self.assertIn("dataset.path", cm.exception.message)

    def test_missing_binary_is_reported(self):
        with self.assertRaises(RaasError) as cm:
            RaasSidecar(command=["/nonexistent/node", "x"])
        self.assertEqual(cm.exception.code, "sidecar_exited")


if __name__ == "__main__":
    unittest.main()
