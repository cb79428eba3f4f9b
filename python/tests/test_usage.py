"""Seed 003's usage statistics (monitor.usage_statistics()) and its log file, from Python."""

import json
import os
import time
import unittest

import genscope
from helpers import metric, quiet_monitor, scratch_dir
from test_allocator import GiB, FakeCuda

FAKE_NVML = os.environ.get("GENSCOPE_FAKE_NVML", "")


def generate(monitor, load_s=0.01, work_s=0.02):
    run = monitor.start_run(pipeline="t2v")
    with run.step("model_loading", "load transformer"):
        time.sleep(load_s)
    with run.step("sampling", "denoise"):
        time.sleep(work_s)
    return run.finish()


class UsageStatisticsTest(unittest.TestCase):
    def test_before_any_generation(self):
        u = quiet_monitor().usage_statistics()
        self.assertEqual(u, {"initialization_seconds": 0.0, "generations": 0,
                             "average_inference_seconds": None, "total_inference_seconds": 0.0,
                             "peak_memory_bytes": None, "current_memory_bytes": None,
                             "current_memory_allocated_bytes": None,
                             "current_memory_reserved_bytes": None, "device_name": None})

    def test_figures_over_two_generations_and_the_log_file(self):
        log = os.path.join(scratch_dir(), "text2video.log")
        monitor = quiet_monitor(log_path=log)
        docs = [generate(monitor), generate(monitor, 0.02, 0.01)]
        u = monitor.usage_statistics()
        loading = [d["steps"][0]["duration_ns"] for d in docs]
        inference = [d["duration_ns"] - l for d, l in zip(docs, loading)]
        self.assertEqual(u["generations"], 2)
        self.assertAlmostEqual(u["initialization_seconds"], sum(loading) / 1e9, places=9)
        self.assertAlmostEqual(u["total_inference_seconds"], sum(inference) / 1e9, places=9)
        self.assertAlmostEqual(u["average_inference_seconds"], sum(inference) / 2e9, places=9)
        peaks = [metric(s, "process.rss_bytes")["peak"] for d in docs for s in d["steps"]]
        self.assertEqual(u["peak_memory_bytes"], max(peaks))
        self.assertEqual(u["current_memory_bytes"],
                         metric(docs[1]["steps"][-1], "process.rss_bytes")["after"])
        self.assertEqual(u["device_name"], "cpu")
        self.assertIsNone(u["current_memory_allocated_bytes"])
        del monitor
        with open(log, encoding="utf-8") as f:
            text = f.read()
        for d in docs:
            self.assertIn(f"run {d['id']} finished", text)
        self.assertGreaterEqual(text.count("load transformer"), 2)  # step lines
        self.assertIn(" - INFO - ", text)

    def test_allocator_figures_are_read_when_asked(self):
        cuda = FakeCuda()
        monitor = quiet_monitor()
        monitor.add_torch_cuda_allocator(cuda=cuda)
        generate(monitor)
        u = monitor.usage_statistics()
        self.assertEqual(u["current_memory_allocated_bytes"], 1 * GiB)
        self.assertEqual(u["current_memory_reserved_bytes"], 2 * GiB)
        cuda.allocate(3 * GiB)
        u = monitor.usage_statistics()
        self.assertEqual(u["current_memory_allocated_bytes"], 4 * GiB)
        self.assertEqual(u["current_memory_reserved_bytes"], 4 * GiB)

    @unittest.skipUnless(os.path.exists(FAKE_NVML), "GENSCOPE_FAKE_NVML (the fake NVML) not built")
    def test_device_name_and_gpu_memory_from_nvml(self):
        scenario = {"driver_version": "550.54", "devices": [{
            "name": "Fake H200", "uuid": "GPU-11111111-2222-3333-4444-555555555555",
            "total": 141 * GiB, "used": [10 * GiB, 30 * GiB, 12 * GiB]}]}
        path = os.path.join(scratch_dir(), "scenario.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(scenario, f)
        saved = os.environ.get("GENSCOPE_FAKE_NVML_SCENARIO")
        os.environ["GENSCOPE_FAKE_NVML_SCENARIO"] = path
        try:
            monitor = genscope.Monitor(nvml=True, nvml_library=FAKE_NVML, sampler=False)
            generate(monitor)
        finally:
            if saved is None:
                os.environ.pop("GENSCOPE_FAKE_NVML_SCENARIO", None)
            else:
                os.environ["GENSCOPE_FAKE_NVML_SCENARIO"] = saved
        u = monitor.usage_statistics()
        self.assertEqual(u["device_name"], "Fake H200")
        self.assertEqual(u["peak_memory_bytes"], 30 * GiB)  # GPU memory when NVML answers
        self.assertIn(u["current_memory_bytes"], (10 * GiB, 30 * GiB, 12 * GiB))


if __name__ == "__main__":
    unittest.main()
