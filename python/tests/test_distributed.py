"""A run's place in a torch.distributed job from Python (docs/distributed.md): the environment
read by the monitor, an initialised process group read by genscope.torch (two real processes,
gloo on the CPU, started by torch.multiprocessing without RANK/WORLD_SIZE), the barrier step,
and the runs merged by `genscope merge`."""

import os
import subprocess
import sys
import tempfile
import unittest

import genscope
from helpers import quiet_monitor

try:
    import torch.distributed as dist
    import torch.multiprocessing as mp
    HAVE_GLOO = dist.is_available() and dist.is_gloo_available()
except Exception:  # no torch
    HAVE_GLOO = False


def _rank(rank, world, init_method, out_dir):
    # no RANK/WORLD_SIZE in this process: only the process group knows the rank
    for v in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"):
        os.environ.pop(v, None)
    import genscope.torch
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world)
    try:
        monitor = genscope.Monitor(sampler=False, nvml=False)
        run = monitor.start_run(pipeline="t2i")
        genscope.torch.mark_distributed(run)
        genscope.torch.barrier(run)
        with run.step("sampling", "denoise"):
            pass
        genscope.write_run(run.finish(), os.path.join(out_dir, f"rank{rank}.json"))
    finally:
        dist.destroy_process_group()


class DistributedTest(unittest.TestCase):
    def test_environment(self):
        saved = {v: os.environ.get(v) for v in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RUN_ID")}
        try:
            os.environ.update(RANK="1", WORLD_SIZE="4", LOCAL_RANK="1", TORCHELASTIC_RUN_ID="py-test")
            info = genscope.distributed_from_environment()
            self.assertEqual((info["rank"], info["world_size"], info["local_rank"], info["group"]),
                             (1, 4, 1, "py-test"))
            doc = quiet_monitor().start_run().finish()
            self.assertEqual(doc["distributed"]["rank"], 1)
            self.assertEqual(doc["distributed"]["group_source"], "torchelastic")
            os.environ["RANK"] = "7"
            doc = quiet_monitor().start_run().finish()
            self.assertNotIn("distributed", doc)  # rank 7 of 4: a monitoring error, not a rank
            self.assertEqual(doc["monitoring_errors"][0]["source"], "distributed")
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        self.assertIsNone(genscope.distributed_from_environment())

    def test_set_distributed_checks_the_rank(self):
        run = quiet_monitor().start_run()
        with self.assertRaises(genscope.Error):
            run.set_distributed(2, 2)
        run.set_distributed(1, 2, local_rank=0, group="g")
        self.assertEqual(run.finish()["distributed"]["rank"], 1)

    @unittest.skipUnless(HAVE_GLOO, "torch.distributed with gloo is not available")
    def test_process_group_ranks_and_merge(self):
        with tempfile.TemporaryDirectory() as d:
            init = "file://" + os.path.join(d, "rendezvous")
            mp.spawn(_rank, args=(2, init, d), nprocs=2, join=True)
            docs = [genscope.read_run(os.path.join(d, f"rank{r}.json")) for r in (0, 1)]
            for r, doc in enumerate(docs):
                self.assertEqual(doc["distributed"]["rank"], r)
                self.assertEqual(doc["distributed"]["world_size"], 2)
                self.assertEqual(doc["distributed"]["group"], init)
                self.assertEqual(doc["distributed"]["group_source"], "process_group")
                barrier = doc["steps"][0]
                self.assertEqual((barrier["name"], barrier["status"]), ("barrier", "ok"))
                self.assertEqual(barrier["labels"]["distributed.barrier"], "true")
            # the CLI beside the module (built with the tests), as `genscope merge` reads them
            cli = os.path.join(os.environ.get("GENSCOPE_BUILD_DIR", ""), "tools", "genscope", "genscope")
            if os.path.exists(cli):
                out = subprocess.run([cli, "merge", "--plain", *(os.path.join(d, f"rank{r}.json") for r in (0, 1))],
                                     capture_output=True, text=True, check=True).stdout
                self.assertIn("Clocks: barrier: barrier #0", out)

    def test_barrier_without_a_process_group_is_skipped(self):
        import genscope.torch
        if HAVE_GLOO and dist.is_initialized():
            self.skipTest("a process group is initialised")
        run = quiet_monitor().start_run()
        genscope.torch.barrier(run)
        step = run.finish()["steps"][0]
        self.assertEqual(step["status"], "skipped")


if __name__ == "__main__":
    unittest.main()
