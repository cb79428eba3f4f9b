"""step.analyze_tensor with NumPy arrays and torch tensors, checked against NumPy."""

import unittest

import numpy as np

import genscope
from helpers import quiet_monitor, step_by_name

try:
    import torch
except ImportError:  # pragma: no cover - torch is installed on the build machines
    torch = None


def analyses(doc, step_name):
    return {a["name"]: a["data"] for a in step_by_name(doc, step_name)["attachments"]
            if a["type"] == "tensor"}


class AnalysisCase(unittest.TestCase):
    """Helpers: one fresh run per analysis; no tests of its own."""

    def setUp(self):
        self.monitor = quiet_monitor(sampler=False)
        self.run = self.monitor.start_run(pipeline="t2i")
        self.rng = np.random.default_rng(1234)

    def tearDown(self):
        self.run.finish()

    def analyse(self, tensor, role="other", **expectations):
        with self.run.step("custom", "analyse") as step:
            step.analyze_tensor("t", tensor, role, **expectations)
        doc = self.run.finish()
        found = analyses(doc, "analyse")
        return found.get("t"), doc

    def assert_stats_match(self, stats, reference):
        ref = np.asarray(reference, dtype=np.float64)
        finite = ref[np.isfinite(ref)]
        self.assertEqual(stats["numel"], ref.size)
        self.assertEqual(stats["nan_count"], int(np.isnan(ref).sum()))
        self.assertEqual(stats["pos_inf_count"], int(np.isposinf(ref).sum()))
        self.assertAlmostEqual(stats["min"], finite.min(), places=6)
        self.assertAlmostEqual(stats["max"], finite.max(), places=6)
        self.assertAlmostEqual(stats["mean"], finite.mean(), places=5)
        self.assertAlmostEqual(stats["std"], finite.std(), places=5)
        self.assertAlmostEqual(stats["l2_norm"], float(np.linalg.norm(finite)),
                               delta=1e-6 * float(np.linalg.norm(finite)))


class TensorTest(AnalysisCase):
    def test_float32_latent_zero_copy(self):
        latent = self.rng.standard_normal((1, 4, 128, 128), dtype=np.float32)
        latent[0, 1, 2, 3] = np.nan
        data, _ = self.analyse(latent, "latent", family="sdxl", source=(1024, 1024))
        self.assertEqual(data["dtype"], "F32")
        self.assertEqual(data["shape"], [1, 4, 128, 128])
        self.assertEqual(data["origin"], {"framework": "numpy", "zero_copy": True, "note": None})
        self.assert_stats_match(data["stats"], latent)
        self.assertEqual(data["classification"]["channels"], 4)
        self.assertIn("latent_family", [c["name"] for c in data["checks"]])

    def test_float16_and_integer_dtypes(self):
        half = (self.rng.standard_normal((2, 77, 64)) * 3).astype(np.float16)
        data, _ = self.analyse(half, "conditioning")
        self.assertEqual(data["dtype"], "F16")
        self.assert_stats_match(data["stats"], half)
        for dtype, name in ((np.uint8, "U8"), (np.int64, "I64"), (np.bool_, "BOOL")):
            self.setUp()
            data, _ = self.analyse(np.arange(24).reshape(2, 3, 4).astype(dtype))
            self.assertEqual(data["dtype"], name)

    def test_non_contiguous_views_are_read_in_place(self):
        base = self.rng.standard_normal((8, 16, 32)).astype(np.float32)
        for view in (base.transpose(2, 0, 1), base[:, ::3, ::-2], base[::-1]):
            self.setUp()
            data, _ = self.analyse(view)
            self.assertEqual(data["shape"], list(view.shape))
            self.assertEqual(data["origin"]["zero_copy"], True)
            self.assertEqual(data["strides"], [s // 4 for s in view.strides])
            self.assert_stats_match(data["stats"], view)

    def test_python_scalars_and_lists_go_through_asarray(self):
        data, _ = self.analyse([[1, 2], [3, 4]])
        self.assertEqual((data["dtype"], data["shape"]), ("I64", [2, 2]))
        self.assertEqual(data["stats"]["mean"], 2.5)
        self.assertEqual(data["origin"]["note"], "converted with numpy.asarray")

    def test_big_endian_is_converted(self):
        values = self.rng.standard_normal(100).astype(">f4")
        data, _ = self.analyse(values)
        self.assertEqual(data["origin"]["zero_copy"], False)
        self.assert_stats_match(data["stats"], values)

    def test_unsupported_dtype_is_a_monitoring_error(self):
        data, doc = self.analyse(np.zeros(4, dtype=np.complex64))
        self.assertIsNone(data)
        errors = [e for e in doc["monitoring_errors"] if e["source"] == "tensor_analysis"]
        self.assertEqual(len(errors), 1)
        self.assertIn("UnsupportedDType", errors[0]["message"])
        self.assertEqual(errors[0]["step"], "analyse")

    def test_expectations(self):
        context = np.zeros((1, 77, 2048), dtype=np.float16)
        data, _ = self.analyse(context, "conditioning", family="sdxl", expected_dtype="bfloat16",
                               expected_device="cuda", memory_threshold_bytes=1024,
                               pooled_shape=(1, 1280), hash=False)
        checks = {c["name"]: c["passed"] for c in data["checks"]}
        self.assertEqual(checks["dtype"], False)
        self.assertEqual(checks["device"], False)
        self.assertEqual(checks["memory"], False)
        self.assertIsNone(data["stats"]["hash"])

    def test_argument_errors_raise(self):
        with self.run.step("custom", "bad") as step:
            with self.assertRaises(TypeError):
                step.analyze_tensor("t", np.zeros(3), colour="red")
            with self.assertRaises(genscope.Error) as e:
                step.analyze_tensor("t", np.zeros(3), family="sd9")
            self.assertEqual(e.exception.name, "UnknownFamily")
            with self.assertRaises(genscope.Error) as e:
                step.analyze_tensor("t", np.zeros(3), "noise")
            self.assertEqual(e.exception.name, "UnknownRole")
            with self.assertRaises(genscope.Error) as e:
                step.analyze_tensor("t", np.zeros(3), expected_dtype="float13")
            self.assertEqual(e.exception.name, "UnknownDType")


class FamilyTest(AnalysisCase):
    def test_family_verdict_from_every_tensor(self):
        from genscope import _genscope as g
        v = g._family_verdict((1, 512, 4096), None, (1, 16, 3, 4, 4))  # no pooled, 5-D latents
        self.assertEqual(v["family"], "Wan 2.x")
        v = g._family_verdict((1, 256, 4096), (1, 768), (1, 16, 64))  # packed 64
        self.assertEqual(v["family"], "Flux.1-schnell")
        v = g._family_verdict((1, 77, 768), None, (1, 16, 64))
        self.assertIsNone(v["family"])
        self.assertTrue(any(n.startswith("conflict") for n in v["notes"]), v["notes"])
        # LTX-Video and LTX-2.3 share a 4096 x 128 context and 128-wide tokens: the audio
        # context decides (() = none received; None = not known: both stay).
        ltx = ((2, 128, 4096), None, (1, 8, 128))
        self.assertEqual(g._family_verdict(*ltx, audio=())["family"], "LTX-Video")
        self.assertEqual(g._family_verdict(*ltx, audio=(2, 128, 2048))["family"], "LTX-2.3")
        self.assertEqual({c["family"] for c in g._family_verdict(*ltx)["candidates"]},
                         {"LTX-Video", "LTX-2.3"})

    def test_alias_resolved_by_the_tensors(self):
        from genscope import _genscope as g
        self.assertEqual(g._resolve_family("wan2.2", (1, 512, 4096), None, (1, 48, 3, 4, 4)),
                         "Wan 2.2 TI2V-5B")
        self.assertEqual(g._resolve_family("wan2.2", (1, 512, 4096), None, (1, 16, 3, 4, 4)),
                         "Wan 2.x")
        self.assertEqual(g._resolve_family("flux2-klein", (1, 512, 12288)), "Flux.2 Klein 9B")
        # "ltx2" is the series: LTX-2.0's 3840-wide context or LTX-2.3's 4096.
        self.assertEqual(g._resolve_family("ltx2", (2, 128, 3840), None, (1, 8, 128), (2, 128, 3840)),
                         "LTX-2")
        self.assertEqual(g._resolve_family("ltx2", (2, 128, 4096), None, (1, 8, 128), (2, 128, 2048)),
                         "LTX-2.3")
        with self.assertRaises(genscope.Error) as e:
            g._resolve_family("sd9")
        self.assertEqual(e.exception.name, "UnknownFamily")

    def test_analysis_into_an_ended_step(self):
        with self.run.step("text_encoding", "text_encoder (prompt)") as step:
            step_id = step.id
        embeds = self.rng.standard_normal((1, 512, 15360)).astype(np.float32)
        self.assertTrue(self.run.analyze_tensor_into(step_id, "conditioning (denoiser input)",
                                                     embeds, "conditioning", family="flux2"))
        self.assertFalse(self.run.analyze_tensor_into(99, "x", embeds))
        doc = self.run.finish()
        data = analyses(doc, "text_encoder (prompt)")["conditioning (denoiser input)"]
        self.assertEqual(data["shape"], [1, 512, 15360])
        self.assertEqual([c["passed"] for c in data["checks"]], [True])
        self.assertEqual(data["classification"]["family"], "Flux.2")


@unittest.skipIf(torch is None, "torch is not installed")
class TorchTensorTest(AnalysisCase):
    def test_pieces_give_the_statistics_of_the_whole(self):
        video = torch.randn(1, 3, 9, 64, 96).permute(0, 2, 1, 3, 4)  # (B, F, C, H, W) view
        data, _ = self.analyse(video, "image", host_piece_bytes=64 << 10, threads=1)
        self.setUp()
        whole, _ = self.analyse(video, "image", threads=1)
        self.assertGreater(data["origin"]["pieces"], 1)
        self.assertLessEqual(data["origin"]["piece_bytes"], 64 << 10)
        self.assertEqual(data["shape"], [1, 9, 3, 64, 96])
        for k in ("numel", "finite_count", "min", "max", "hash"):
            self.assertEqual(data["stats"][k], whole["stats"][k], k)
        self.assertAlmostEqual(data["stats"]["std"], whole["stats"]["std"], places=9)
        self.setUp()
        with self.run.step("custom", "bad") as step, self.assertRaises(genscope.Error):
            step.analyze_tensor("t", video, host_piece_bytes=0)

    def test_torch_float32_and_bfloat16(self):
        t = torch.randn(1, 16, 64, 64, requires_grad=True)
        data, _ = self.analyse(t * 2, "latent", family="flux-dev")
        self.assertEqual(data["dtype"], "F32")
        self.assertEqual(data["origin"]["framework"], "torch")
        self.assertTrue(data["origin"]["zero_copy"])
        self.assert_stats_match(data["stats"], (t * 2).detach().numpy())

        self.setUp()
        bf = torch.randn(2, 512, 4096).to(torch.bfloat16)
        data, _ = self.analyse(bf, "conditioning", family="flux-dev")
        self.assertEqual(data["dtype"], "BF16")
        self.assert_stats_match(data["stats"], bf.float().numpy())

    def test_transposed_bfloat16_is_read_in_place(self):
        bf = torch.randn(64, 32).to(torch.bfloat16).t()
        data, _ = self.analyse(bf)
        self.assertEqual((data["dtype"], data["shape"], data["strides"]), ("BF16", [32, 64], [1, 32]))
        self.assertTrue(data["origin"]["zero_copy"])
        self.assert_stats_match(data["stats"], bf.float().numpy())

    def test_unreadable_tensor_is_a_monitoring_error(self):
        data, doc = self.analyse(torch.empty(2, 3, device="meta"))
        self.assertIsNone(data)
        messages = [e["message"] for e in doc["monitoring_errors"]
                    if e["source"] == "tensor_analysis"]
        self.assertEqual(len(messages), 1)
        self.assertIn("NotImplementedError", messages[0])

    def test_device_tensor_is_copied_and_says_so(self):
        class FakeCudaTensor:
            """A torch-like tensor on "cuda:0" whose .cpu() gives a real CPU tensor."""

            __module__ = "torch.fake"

            def __init__(self, cpu_tensor):
                self._cpu = cpu_tensor
                self.device = "cuda:0"
                self.dtype = cpu_tensor.dtype

            def detach(self):
                return self

            def cpu(self):
                return self._cpu

        cpu = torch.randn(2, 4, 8, 8, dtype=torch.float16)
        data, _ = self.analyse(FakeCudaTensor(cpu), expected_device="cuda")
        self.assertEqual(data["device"], "cuda:0")
        self.assertEqual(data["origin"]["note"], "copied from cuda:0")
        self.assertFalse(data["origin"]["zero_copy"])
        self.assertTrue({c["name"]: c["passed"] for c in data["checks"]}["device"])
        self.assert_stats_match(data["stats"], cpu.numpy())


if __name__ == "__main__":
    unittest.main()
