"""nvidia-smi output parsing, on recorded outputs (tests/fixtures/nvidia_smi/): H100 and H200,
several GPUs, [N/A] and [Not Supported] fields, units and no units, processes and none; every
malformed file gives the error its name starts with; mutated inputs give NvidiaSmiError or
a parse, never another exception."""

import os
import stat
import tempfile
import unittest

import nvidia_smi
import nvidia_smi_fuzz
from context import APPS_QUERY, GPU_QUERY
from nvidia_smi import NvidiaSmiError, Value

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.environ.get("GENSCOPE_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE))),
                        "tests", "fixtures", "nvidia_smi")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return f.read()


class GpuQueryTest(unittest.TestCase):
    def test_h100(self):
        [gpu] = nvidia_smi.parse_gpus(fixture("h100_query_gpu.csv"), GPU_QUERY)
        self.assertEqual(gpu["name"], Value("NVIDIA H100 80GB HBM3"))
        self.assertEqual(gpu["uuid"].value, "GPU-5ee1c5b4-3f0a-7d4e-91c2-0b8e6f4a2d71")
        self.assertEqual(gpu["driver_version"].value, "580.159.04")
        self.assertEqual(gpu["index"].value, 0)
        self.assertEqual(gpu["memory.total"].value, 81559)
        self.assertEqual(gpu["memory.reserved"].value + gpu["memory.used"].value +
                         gpu["memory.free"].value, 81559)
        self.assertEqual(gpu["power.draw"].value, 69.53)
        self.assertIsInstance(gpu["power.draw"].value, float)
        self.assertEqual(gpu["clocks.current.sm"].value, 345)
        self.assertEqual(gpu["clocks.current.memory"].value, 2619)
        self.assertEqual(gpu["temperature.gpu"].value, 31)
        self.assertEqual(gpu["utilization.gpu"].value, 0)

    def test_h200(self):
        [gpu] = nvidia_smi.parse_gpus(fixture("h200_query_gpu.csv"), GPU_QUERY)
        self.assertEqual(gpu["name"].value, "NVIDIA H200")
        self.assertEqual(gpu["memory.total"].value, 143771)
        self.assertEqual(gpu["clocks.current.memory"].value, 3201)

    def test_eight_gpus_in_order(self):
        gpus = nvidia_smi.parse_gpus(fixture("h100x8_query_gpu.csv"), GPU_QUERY)
        self.assertEqual([g["index"].value for g in gpus], list(range(8)))
        self.assertEqual(gpus[0]["utilization.gpu"].value, 100)
        self.assertEqual(gpus[0]["memory.used"].value, 72804)
        self.assertEqual(len({g["uuid"].value for g in gpus}), 8)
        for g in gpus:
            self.assertEqual(g["memory.reserved"].value + g["memory.used"].value +
                             g["memory.free"].value, g["memory.total"].value)

    def test_unavailable_fields_keep_their_reason(self):
        [gpu] = nvidia_smi.parse_gpus(fixture("h100_pcie_vm_query_gpu_na.csv"), GPU_QUERY)
        self.assertEqual(gpu["power.draw"], Value(None, "Not Supported"))
        self.assertEqual(gpu["memory.reserved"], Value(None, "N/A"))
        self.assertEqual(gpu["utilization.gpu"], Value(None, "N/A"))
        self.assertEqual(gpu["memory.used"].value, 0)

    def test_nounits_values_under_a_header_with_units(self):
        [gpu] = nvidia_smi.parse_gpus(fixture("h200_query_gpu_nounits.csv"), GPU_QUERY)
        self.assertEqual(gpu["memory.used"].value, 2052)
        self.assertEqual(gpu["power.draw"].value, 213.45)
        self.assertEqual(gpu["clocks.current.sm"].value, 1980)

    def test_a_subset_of_fields(self):
        text = "uuid, memory.used [MiB]\nGPU-a, 2052 MiB\nGPU-b, 0 MiB\n"
        rows = nvidia_smi.parse_gpus(text, ["uuid", "memory.used"])
        self.assertEqual([(r["uuid"].value, r["memory.used"].value) for r in rows],
                         [("GPU-a", 2052), ("GPU-b", 0)])

    def test_crlf_and_trailing_blank_lines(self):
        text = fixture("h100_query_gpu.csv").replace("\n", "\r\n") + "\r\n\r\n"
        self.assertEqual(len(nvidia_smi.parse_gpus(text, GPU_QUERY)), 1)


class AppsQueryTest(unittest.TestCase):
    def test_processes(self):
        apps = nvidia_smi.parse_apps(fixture("h100_apps.csv"), APPS_QUERY)
        self.assertEqual([(a["pid"].value, a["used_memory"].value) for a in apps],
                         [(48213, 1514), (48377, 2538)])

    def test_eight_gpu_processes(self):
        apps = nvidia_smi.parse_apps(fixture("h100x8_apps.csv"), APPS_QUERY)
        self.assertEqual([a["used_memory"].value for a in apps], [72580, 72581, 72582])

    def test_no_processes_in_every_spelling(self):
        for name in ("h200_apps_none.csv", "apps_no_processes.txt", "apps_empty.txt"):
            self.assertEqual(nvidia_smi.parse_apps(fixture(name), APPS_QUERY), [], name)

    def test_memory_not_available(self):
        [app] = nvidia_smi.parse_apps(fixture("h200_apps_na_memory.csv"), APPS_QUERY)
        self.assertEqual(app["used_memory"], Value(None, "N/A"))
        self.assertEqual(app["pid"].value, 7311)


class MalformedTest(unittest.TestCase):
    def test_each_malformed_fixture_gives_its_named_error(self):
        folder = os.path.join(FIXTURES, "malformed")
        names = sorted(os.listdir(folder))
        self.assertGreaterEqual(len(names), 15)
        for name in names:
            with self.subTest(name=name):
                expected = name.split("_")[0]
                with open(os.path.join(folder, name)) as f:
                    text = f.read()
                with self.assertRaises(NvidiaSmiError) as caught:
                    if name.endswith(".apps.csv"):
                        nvidia_smi.parse_apps(text, APPS_QUERY)
                    else:
                        nvidia_smi.parse_gpus(text, GPU_QUERY)
                self.assertEqual(caught.exception.name, expected, str(caught.exception))
                self.assertTrue(str(caught.exception).startswith(expected + ": "))

    def test_unknown_field_is_refused_before_parsing(self):
        with self.assertRaises(NvidiaSmiError) as caught:
            nvidia_smi.parse_gpus("fan.speed [%]\n30 %\n", ["fan.speed"])
        self.assertEqual(caught.exception.name, "UnknownField")

    def test_mutations_never_escape_as_other_exceptions(self):
        cases = nvidia_smi_fuzz.fuzz(FIXTURES, iterations=3000, seed=13)
        self.assertEqual(cases["other"], [], "exceptions other than NvidiaSmiError")
        self.assertGreater(cases["errors"], 100)  # the mutations do break things
        self.assertGreater(cases["parsed"], 100)  # and some still parse


class RunQueryTest(unittest.TestCase):
    """run_query against real child processes standing in for nvidia-smi."""

    def script(self, body):
        path = os.path.join(self.tmp.name, "nvidia-smi")
        with open(path, "w") as f:
            f.write("#!/bin/sh\n" + body)
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
        return path

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def test_a_field_unknown_to_this_nvidia_smi_is_dropped_and_named(self):
        smi = self.script('case "$1" in *memory.reserved*) '
                          'echo \'Field "memory.reserved" is not a valid field to query.\'; '
                          'exit 2;; esac\necho "uuid, memory.used [MiB]"\necho "GPU-a, 3 MiB"\n')
        rows, dropped = nvidia_smi.run_query(smi, "gpu", ["uuid", "memory.reserved",
                                                          "memory.used"])
        self.assertEqual(dropped, ["memory.reserved"])
        self.assertEqual(rows[0]["memory.used"].value, 3)

    def test_failure_is_named_with_the_output(self):
        smi = self.script("echo 'NVIDIA-SMI has failed because it could not communicate with "
                          "the NVIDIA driver.'\nexit 9\n")
        with self.assertRaises(NvidiaSmiError) as caught:
            nvidia_smi.run_query(smi, "gpu", ["uuid"])
        self.assertEqual(caught.exception.name, "NvidiaSmiFailed")
        self.assertIn("exit 9", str(caught.exception))
        self.assertIn("could not communicate", str(caught.exception))

    def test_missing_program(self):
        with self.assertRaises(NvidiaSmiError) as caught:
            nvidia_smi.run_query(os.path.join(self.tmp.name, "absent"), "compute-apps",
                                 APPS_QUERY)
        self.assertEqual(caught.exception.name, "NvidiaSmiFailed")


if __name__ == "__main__":
    unittest.main()
