"""Monitor outputs from Python: the history database, the Prometheus endpoint / Pushgateway and
the OpenTelemetry export (a real collector checks the content: tests/cli/otlp_collector.sh)."""

import http.server
import os
import socket
import sqlite3
import threading
import time
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

    def test_otlp_posts_each_finished_run_as_protobuf(self):
        received = []

        class Collector(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.append((self.path, self.headers["Content-Type"], self.headers.get("x-team"), body))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        server = http.server.HTTPServer(("127.0.0.1", 0), Collector)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            os.environ["OTEL_EXPORTER_OTLP_HEADERS"] = "x-team=imaging%20lab"
            try:
                monitor = quiet_monitor(otlp=f"http://127.0.0.1:{server.server_port}")
            finally:
                del os.environ["OTEL_EXPORTER_OTLP_HEADERS"]
            run = monitor.start_run(pipeline="py-otlp")
            with run.step("sampling", "denoise"):
                pass
            doc = run.finish()
            self.assertEqual([e for e in doc["monitoring_errors"] if e["source"] == "otlp"], [])
        finally:
            server.shutdown()
            server.server_close()
        self.assertEqual([r[0] for r in received], ["/v1/traces", "/v1/metrics"])
        for path, content_type, team, body in received:
            self.assertEqual(content_type, "application/x-protobuf")
            self.assertEqual(team, "imaging lab")
            self.assertIn(b"py-otlp", body)
            self.assertIn(doc["id"].encode(), body)  # resource attribute genscope.run.id

    def test_otlp_to_a_dead_collector_is_a_bounded_monitoring_error(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]  # closed again: nothing listens
        monitor = quiet_monitor(otlp=f"http://127.0.0.1:{port}")
        run = monitor.start_run(pipeline="py-otlp-dead")
        with run.step("sampling", "denoise"):
            pass
        start = time.monotonic()
        doc = run.finish()
        self.assertLess(time.monotonic() - start, 8)  # the export waits 3 s at most
        errors = [e for e in doc["monitoring_errors"] if e["source"] == "otlp"]
        self.assertTrue(errors, doc["monitoring_errors"])

    def test_bad_outputs_are_named_errors_before_any_run(self):
        with self.assertRaises(genscope.Error) as e:
            quiet_monitor(otlp="udp://collector:4318")
        self.assertIn("InvalidOtlpEndpoint", str(e.exception))
        with self.assertRaises(genscope.Error) as e:
            quiet_monitor(pushgateway="ftp://gateway:9091")
        self.assertIn("InvalidPushgatewayUrl", str(e.exception))
        with self.assertRaises(genscope.Error) as e:
            quiet_monitor(metrics_port=70000)
        self.assertIn("InvalidArgument", str(e.exception))


if __name__ == "__main__":
    unittest.main()
