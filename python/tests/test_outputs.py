"""Monitor outputs from Python: the history database and the Prometheus endpoint / Pushgateway."""

import os
import socket
import sqlite3
import unittest
import urllib.request

import genscope
from helpers import quiet_monitor, scratch_dir


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class OutputsTest(unittest.TestCase):
    def test_record_stores_each_finished_run_in_the_history(self):
        db = os.path.join(scratch_dir(), "history.db")
        monitor = quiet_monitor(record=True, history_db=db)
        for _ in range(2):
            run = monitor.start_run(pipeline="py-recorded")
            with run.step("sampling", "denoise"):
                pass
            doc = run.finish()
        del monitor  # joins the sinks' thread
        with sqlite3.connect(db) as con:
            ids = [row[0] for row in con.execute("SELECT run_id FROM runs WHERE pipeline = ?", ("py-recorded",))]
        self.assertEqual(len(ids), 2)
        self.assertIn(doc["id"], ids)

    def test_metrics_port_serves_the_live_run(self):
        port = free_port()
        monitor = quiet_monitor(metrics_port=port)
        run = monitor.start_run(pipeline="py-live")
        with run.step("sampling", "denoise") as step:
            step.begin_iterations()
            step.mark_iteration()
            # The endpoint learns of events through the monitor's dispatcher thread.
            for _ in range(200):
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    text = r.read().decode()
                if 'genscope_current_step_elapsed_seconds{kind="sampling"' in text:
                    break
            self.assertIn("genscope_run_active 1", text)
            self.assertIn('genscope_run_info{pipeline="py-live"', text)
            self.assertIn('genscope_current_step_elapsed_seconds{kind="sampling"', text)
        run.finish()

    def test_bad_outputs_are_named_errors_before_any_run(self):
        with self.assertRaises(genscope.Error) as e:
            quiet_monitor(pushgateway="ftp://gateway:9091")
        self.assertIn("InvalidPushgatewayUrl", str(e.exception))
        with self.assertRaises(genscope.Error) as e:
            quiet_monitor(metrics_port=70000)
        self.assertIn("InvalidArgument", str(e.exception))


if __name__ == "__main__":
    unittest.main()
