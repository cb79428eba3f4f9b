"""The torch CUDA allocator probe, fed by an injected torch.cuda look-alike (no GPU here)."""

import os
import subprocess
import sys
import threading
import time
import unittest

from helpers import metric, quiet_monitor, step_by_name

try:
    import torch
except ImportError:  # pragma: no cover - torch is installed on the build machines
    torch = None

GiB = 1 << 30


class FakeCuda:
    """Mimics torch.cuda.memory_stats / reset_peak_memory_stats for one device."""

    def __init__(self):
        self.lock = threading.Lock()
        self.allocated = 1 * GiB
        self.reserved = 2 * GiB
        self.peak_allocated = self.allocated
        self.peak_reserved = self.reserved
        self.resets = 0
        self.devices = set()
        self.threads = set()
        self.calls = 0

    def allocate(self, nbytes):
        with self.lock:
            self.allocated += nbytes
            self.reserved = max(self.reserved, self.allocated)
            self.peak_allocated = max(self.peak_allocated, self.allocated)
            self.peak_reserved = max(self.peak_reserved, self.reserved)

    def memory_stats(self, device):
        with self.lock:
            self.devices.add(device)
            self.threads.add(threading.get_ident())
            self.calls += 1
            return {
                "allocated_bytes.all.current": self.allocated,
                "reserved_bytes.all.current": self.reserved,
                "allocated_bytes.all.peak": self.peak_allocated,
                "reserved_bytes.all.peak": self.peak_reserved,
                "num_alloc_retries": 0,
            }

    def reset_peak_memory_stats(self, device):
        with self.lock:
            self.resets += 1
            self.peak_allocated = self.allocated
            self.peak_reserved = self.reserved


class BrokenCuda(FakeCuda):
    """memory_stats raises, as torch does when CUDA is unusable."""

    def memory_stats(self, device):
        raise RuntimeError("CUDA driver initialization failed")


class AllocatorTest(unittest.TestCase):
    def test_exact_peak_of_a_transient_allocation(self):
        cuda = FakeCuda()
        monitor = quiet_monitor()
        monitor.add_torch_cuda_allocator(1, cuda=cuda)
        run = monitor.start_run(pipeline="t2i")
        with run.step("vae_decode", "decode"):
            cuda.allocate(3 * GiB)   # transient activation buffer ...
            cuda.allocate(-3 * GiB)  # ... freed before the step ends
            cuda.allocate(GiB // 2)
        doc = run.finish()
        self.assertIn("allocator", doc["probes"])
        s = step_by_name(doc, "decode")
        alloc = metric(s, "alloc.cuda:1.allocated_bytes")
        self.assertEqual(alloc["before"], 1 * GiB)
        self.assertEqual(alloc["after"], 1.5 * GiB)
        self.assertEqual(alloc["peak"], 4 * GiB)
        self.assertEqual(alloc["peak_source"], "exact")
        reserved = metric(s, "alloc.cuda:1.reserved_bytes")
        self.assertEqual(reserved["peak"], 4 * GiB)
        self.assertEqual(cuda.devices, {1})
        self.assertGreaterEqual(cuda.resets, 1)
        self.assertEqual([e for e in doc["monitoring_errors"] if e["source"] == "allocator"], [])

    def test_sampler_thread_calls_python_while_pipeline_runs_python(self):
        cuda = FakeCuda()
        monitor = quiet_monitor(sample_interval_ms=1)
        monitor.add_torch_cuda_allocator(cuda=cuda)
        run = monitor.start_run()
        with run.step("sampling", "denoise") as step:
            # Pure Python work holding the GIL for at least 0.15 s, and on a loaded machine
            # until the sampler has read the allocator a few times (bounded: 20 s).
            start = time.monotonic()
            while time.monotonic() - start < 20:
                sum(range(1000))
                step.mark_iteration()
                if time.monotonic() - start >= 0.15 and cuda.calls >= 12:
                    break
        doc = run.finish()
        self.assertIn(threading.get_ident(), cuda.threads)
        self.assertGreater(len(cuda.threads), 1, "the sampler thread never read the allocator")
        self.assertGreater(doc["series"]["samples_taken"], 5)
        self.assertIn("alloc.cuda:0.allocated_bytes",
                      [m["name"] for m in doc["series"]["metrics"]])

    def test_python_exception_in_callback_is_recorded_not_raised(self):
        monitor = quiet_monitor()
        monitor.add_torch_cuda_allocator(cuda=BrokenCuda())
        run = monitor.start_run()
        with run.step("text_encoding", "encode") as step:
            step.add_counter("tokens", 77)
        doc = run.finish()
        s = step_by_name(doc, "encode")
        self.assertEqual(s["status"], "ok")
        errors = [e for e in doc["monitoring_errors"] if e["source"] == "allocator"]
        self.assertTrue(errors, doc["monitoring_errors"])
        self.assertIn("RuntimeError: CUDA driver initialization failed", errors[0]["message"])
        self.assertIsNone(metric(s, "alloc.cuda:0.allocated_bytes")["after"])

    def test_missing_key_and_bad_return_are_recorded(self):
        class NoPeaks(FakeCuda):
            def memory_stats(self, device):
                stats = super().memory_stats(device)
                del stats["allocated_bytes.all.peak"]
                return stats

        class NotADict(FakeCuda):
            def memory_stats(self, device):
                return 42

        for cuda, expected in ((NoPeaks(), "KeyError"), (NotADict(), "returned int")):
            monitor = quiet_monitor(sampler=False)
            monitor.add_torch_cuda_allocator(cuda=cuda)
            run = monitor.start_run()
            with run.step("custom", "x"):
                pass
            doc = run.finish()
            messages = " ".join(e["message"] for e in doc["monitoring_errors"])
            self.assertIn(expected, messages)

    def test_unavailable_cuda_is_recorded_not_read_as_zero(self):
        class NoCuda(FakeCuda):
            def is_available(self):
                return False

        cudas = [NoCuda()]
        if torch is not None and not torch.cuda.is_available():
            cudas.append(None)  # the real torch.cuda of a CPU-only torch
        for cuda in cudas:
            monitor = quiet_monitor(sampler=False)
            monitor.add_torch_cuda_allocator(cuda=cuda)
            run = monitor.start_run()
            with run.step("custom", "x"):
                pass
            doc = run.finish()
            s = step_by_name(doc, "x")
            self.assertIsNone(metric(s, "alloc.cuda:0.allocated_bytes")["after"])
            messages = [e["message"] for e in doc["monitoring_errors"] if e["source"] == "allocator"]
            self.assertTrue(messages)
            self.assertIn("torch.cuda.is_available() is False", messages[0])

    def test_empty_stats_mean_an_unused_allocator(self):
        class Unused(FakeCuda):
            def memory_stats(self, device):
                return {}

        monitor = quiet_monitor(sampler=False)
        monitor.add_torch_cuda_allocator(cuda=Unused())
        run = monitor.start_run()
        with run.step("custom", "x"):
            pass
        s = step_by_name(run.finish(), "x")
        self.assertEqual(metric(s, "alloc.cuda:0.allocated_bytes")["after"], 0)

    def test_interpreter_exit_with_an_open_step_does_not_hang(self):
        script = (
            "import sys, time, genscope\n"
            f"sys.path.insert(0, {os.path.dirname(__file__)!r})\n"
            "from test_allocator import FakeCuda\n"
            "monitor = genscope.Monitor(sample_interval_ms=1, nvml=False)\n"
            "monitor.add_torch_cuda_allocator(cuda=FakeCuda())\n"
            "run = monitor.start_run()\n"
            "step = run.step('sampling', 'never ended')\n"
            "time.sleep(0.05)\n"
            "print('exiting')\n")
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              timeout=30)
        self.assertEqual((done.returncode, done.stdout.strip()), (0, "exiting"), done.stderr)


class ThreadTest(unittest.TestCase):
    def test_steps_from_several_python_threads(self):
        cuda = FakeCuda()
        monitor = quiet_monitor(sample_interval_ms=1)
        monitor.add_torch_cuda_allocator(cuda=cuda)
        run = monitor.start_run(pipeline="batch")
        failures = []
        # All four alive together (a thread that ended before another began may hand its
        # pthread id on, and the run numbers threads by id).
        together = threading.Barrier(4)

        def worker(index):
            try:
                together.wait(timeout=30)
                for j in range(5):
                    with run.step("sampling", f"t{index}-s{j}") as step:
                        for _ in range(4):
                            cuda.allocate(1024)
                            step.mark_iteration()
                        step.add_counter("items", 1)
                        with run.step("custom", f"t{index}-s{j}-inner"):
                            time.sleep(0.001)
                together.wait(timeout=30)
            except BaseException as e:  # noqa: BLE001 - reported below
                failures.append(e)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
            self.assertFalse(t.is_alive(), "a step call deadlocked")
        self.assertEqual(failures, [])
        doc = run.finish()
        self.assertEqual(len(doc["steps"]), 4 * 5 * 2)
        by_id = {s["id"]: s for s in doc["steps"]}
        for s in doc["steps"]:
            self.assertEqual(s["status"], "ok")
            if s["name"].endswith("-inner"):
                parent = by_id[s["parent_id"]]
                self.assertEqual(parent["name"], s["name"][: -len("-inner")])
                self.assertEqual(parent["thread"], s["thread"])
            else:
                self.assertEqual(s["parent_id"], -1)
                self.assertEqual(s["iterations"]["count"], 4)
        self.assertEqual(len({s["thread"] for s in doc["steps"]}), 4)

    def test_ending_a_step_from_another_thread_is_refused(self):
        monitor = quiet_monitor(sampler=False)
        run = monitor.start_run()
        step = run.step("custom", "owned")
        errors = []

        def other():
            try:
                step.end()
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        t = threading.Thread(target=other)
        t.start()
        t.join()
        self.assertEqual([getattr(e, "name", None) for e in errors], ["StepWrongThread"])
        step.end()
        self.assertEqual(step_by_name(run.finish(), "owned")["status"], "ok")


if __name__ == "__main__":
    unittest.main()
