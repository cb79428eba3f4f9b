"""The sampler-plateau analysis (check_sampler.plateau_rows) on run documents recorded by the
real genscope monitor over the fake NVML, whose `used` figure rises for a number of memory
queries and falls back: a test of the analysis, not of a GPU."""

import json
import os
import sys
import tempfile
import time
import unittest

import verdicts as v

MIB = 1 << 20
GIB = 1 << 30
BUILD = os.environ.get("GENSCOPE_BUILD_DIR", "")
FAKE = os.environ.get("GENSCOPE_FAKE_NVML", "")


def load_genscope():
    sys.path.insert(0, os.path.join(BUILD, "python"))
    try:
        import genscope
        return genscope
    except ImportError:
        return None


@unittest.skipUnless(FAKE and os.path.exists(FAKE) and load_genscope(),
                     "needs the build's genscope module and fake NVML (ctest gpu.unit)")
class PlateauTest(unittest.TestCase):
    def record(self, high_queries):
        """A run whose step sees 1 GiB, then 3 GiB + 16 MiB for `high_queries` NVML memory
        queries (one per 10 ms sample), then 1 GiB again."""
        used = [GIB] * 10 + [3 * GIB + 16 * MIB] * high_queries + [GIB]
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"driver_version": "580.159.04", "devices": [{
                "name": "Fake H100", "uuid": "GPU-fake", "total": 80 * GIB, "used": used,
                "utilization": {"gpu": 0, "memory": 0}, "temperature": 30, "power_mw": 70000,
                "clocks": {"sm": 345, "mem": 2619}}]}, f)
        self.addCleanup(os.remove, f.name)
        os.environ["GENSCOPE_FAKE_NVML_SCENARIO"] = f.name
        genscope = load_genscope()
        monitor = genscope.Monitor(sample_interval_ms=10, max_sample_interval_ms=10, nvml_library=FAKE)
        run = monitor.start_run()
        with run.step("custom", "plateau"):
            time.sleep(2.0)
        return run.finish()

    def test_a_plateau_held_long_enough_passes(self):
        doc = self.record(50)  # 50 samples of 10 ms (more on a loaded machine) >= 0.2 s
        rows = __import__("check_sampler").plateau_rows(doc, "plateau", 0, 2 * GIB, 0.5, 10,
                                                         [3088], "fake")
        verdicts = {r.figure: r.verdict for r in rows}
        self.assertEqual(verdicts, {"plateau length": v.PASS, "samples on the plateau": v.PASS,
                                    "plateau level (median)": v.PASS, "release seen": v.PASS},
                         rows)

    def test_a_short_plateau_fails_and_a_wrong_level_fails(self):
        doc = self.record(5)  # 5 samples < 10 required, 4 intervals < 0.2 s
        rows = __import__("check_sampler").plateau_rows(doc, "plateau", 0, 2 * GIB, 0.5, 10,
                                                         [3000], "fake")
        verdicts = {r.figure: r.verdict for r in rows}
        self.assertEqual(verdicts["plateau length"], v.FAIL, rows)
        self.assertEqual(verdicts["samples on the plateau"], v.FAIL, rows)
        self.assertEqual(verdicts["plateau level (median)"], v.FAIL, rows)
        self.assertEqual(verdicts["release seen"], v.PASS, rows)


if __name__ == "__main__":
    unittest.main()
