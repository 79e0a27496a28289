"""RaasSidecar.pause_generation / resume_generation / paused() against a real sidecar process (scripted backend)."""
from __future__ import annotations

import io
import unittest

from tests.helpers import NODE, SCRIPTED

from raas_bridge import RaasError, RaasSidecar


def scripted() -> RaasSidecar:
    return RaasSidecar(command=[NODE, SCRIPTED], log_stream=io.StringIO())


class PauseTest(unittest.TestCase):
    def test_a_colocated_step(self):
        with scripted() as rs:
            self.assertIn("pause_generation", rs.info["ops"])
            self.assertIn("pause_generation", rs.info["capabilities"])
            batch = rs.next_batch(timeout_s=10)
            with rs.paused("abort", abort_grace_s=1) as report:
                self.assertEqual((report["paused"], report["mode"], report["policy_version"]), (True, "abort", batch.policy_version))
                self.assertEqual(rs.update_weights(), {"policy_version": 1})
            self.assertEqual(rs.next_batch(timeout_s=10).policy_version, 1)
            self.assertEqual(rs.pause_generation()["mode"], "drain")
            self.assertEqual(rs.resume_generation(), {"resumed": True, "policy_version": 1, "released": 0})

    def test_paused_resumes_when_the_block_raises(self):
        with scripted() as rs:
            rs.next_batch(timeout_s=10)  # starts the coordinator
            with self.assertRaises(ZeroDivisionError):
                with rs.paused():
                    self.assertEqual(rs.status()["coordinator"]["paused"], "drain")
                    1 / 0
            self.assertIs(rs.status()["coordinator"]["paused"], False)

    def test_a_bad_mode_names_the_field(self):
        with scripted() as rs:
            with self.assertRaises(RaasError) as cm:
                rs.pause_generation("sleep")
            self.assertEqual(cm.exception.code, "bad_request")
            self.assertIn("mode", cm.exception.message)


if __name__ == "__main__":
    unittest.main()
