"""What every GPU check needs: the built programs, nvidia-smi, torch, scratch space.

A check is a function `check(ctx) -> list[Row]`. It raises CheckSkipped when what it checks
is not there (a feature not built yet, torch.cuda absent in a plumbing run) and CheckFailed
when something it needs is broken on a GPU machine; the driver turns both into rows.
"""

import json
import os
import subprocess
import sys

import nvidia_smi


class CheckSkipped(Exception):
    """The check did not run; the text says why (SKIP row)."""


class CheckFailed(Exception):
    """The check could not run although it should have (FAIL row)."""


MIB = 1 << 20

# The fields of the NVML comparison, in the order asked of nvidia-smi.
GPU_QUERY = ["index", "uuid", "name", "driver_version", "pci.bus_id", "memory.total",
             "memory.reserved", "memory.used", "memory.free", "utilization.gpu",
             "utilization.memory", "temperature.gpu", "power.draw", "clocks.current.sm",
             "clocks.current.memory"]
APPS_QUERY = ["pid", "gpu_uuid", "used_memory"]


class Context:
    def __init__(self, args):
        self.cli = args.cli
        self.torch_cli = args.torch_cli or None
        self.torch_status = args.torch_status or ""
        self.pythonpath = args.pythonpath
        self.bench = args.bench or None
        self.shim = args.shim or None
        self.nvidia_smi = args.nvidia_smi
        self.work = args.work
        self.plumbing = args.plumbing
        self.source_dir = args.source_dir
        self.nvml_library = os.environ.get("GENSCOPE_NVML_LIBRARY") or "libnvidia-ml.so.1"
        self.python = sys.executable
        os.makedirs(self.work, exist_ok=True)
        self.genscope = None
        self.genscope_error = ""
        self.torch = None
        self.torch_error = ""
        self._probe = None

    # --- imports ----------------------------------------------------------------------------

    def load_modules(self):
        """Imports genscope (the build's) and torch; either missing is noted, not fatal: the
        checks that need it fail with the reason (need_genscope, need_cuda)."""
        sys.path.insert(0, self.pythonpath)
        try:
            import genscope  # the build's extension
            self.genscope = genscope
        except Exception as e:
            self.genscope_error = f"import genscope from {self.pythonpath}: {type(e).__name__}: {e}"
        try:
            import torch
            self.torch = torch
        except Exception as e:  # any import failure: the torch checks say why
            self.torch_error = f"import torch failed: {type(e).__name__}: {e}"

    def need_genscope(self):
        """The build's genscope module; CheckFailed when the extension did not build or load."""
        if self.genscope is None:
            raise CheckFailed(f"the Python extension is missing: {self.genscope_error}")
        return self.genscope

    def need_cuda(self):
        """The CUDA device index checks use; skips (plumbing) or fails (GPU machine) without."""
        torch = self.torch
        if torch is None:
            reason = self.torch_error or "torch is not importable"
        elif not torch.cuda.is_available():
            reason = f"torch {torch.__version__}: torch.cuda.is_available() is False"
        else:
            return torch.cuda.current_device()
        if self.plumbing:
            raise CheckSkipped(f"{reason} (plumbing run: no GPU here)")
        raise CheckFailed(f"{reason} on a machine with an NVIDIA GPU")

    # --- genscope's own view ------------------------------------------------------------------

    def probe(self, refresh=False):
        """`genscope probe --json` (cached): host, NVML GPUs and one sample of their figures."""
        if self._probe is None or refresh:
            done = subprocess.run([self.cli, "probe", "--json"], capture_output=True, text=True,
                                  timeout=120)
            if done.returncode != 0:
                raise CheckFailed(f"genscope probe --json exit {done.returncode}: "
                                  f"{done.stderr.strip()[:300]}")
            self._probe = json.loads(done.stdout)
        return self._probe

    def nvml_index(self, cuda_device):
        """NVML's index of a CUDA device (matched by UUID; CUDA and NVML may order GPUs
        differently). Returns (index, how it was matched)."""
        gpus = self.probe().get("probes", {}).get("nvml", {}).get("gpus", [])
        uuid = ""
        try:
            uuid = str(self.torch.cuda.get_device_properties(cuda_device).uuid)
        except Exception:
            pass
        for g in gpus:
            if uuid and g.get("uuid", "").removeprefix("GPU-") == uuid.removeprefix("GPU-"):
                return g["index"], f"UUID {g['uuid']}"
        if len(gpus) == 1:
            return gpus[0]["index"], "the only GPU NVML lists"
        raise CheckFailed(f"cannot match CUDA device {cuda_device} (UUID {uuid or '?'}) with "
                          f"NVML's GPUs {[g.get('uuid') for g in gpus]}")

    # --- the independent side --------------------------------------------------------------------

    def smi_gpus(self, fields=None):
        rows, dropped = nvidia_smi.run_query(self.nvidia_smi, "gpu", fields or GPU_QUERY)
        return rows, dropped

    def smi_apps(self):
        rows, _ = nvidia_smi.run_query(self.nvidia_smi, "compute-apps", APPS_QUERY)
        return rows

    def child_env(self, **extra):
        """Environment of a Python child that imports the build's genscope."""
        env = dict(os.environ)
        env["PYTHONPATH"] = self.pythonpath + (os.pathsep + env["PYTHONPATH"]
                                               if env.get("PYTHONPATH") else "")
        env["PYTHONUNBUFFERED"] = "1"
        env.update({k: str(v) for k, v in extra.items()})
        return env

    def scratch(self, name):
        path = os.path.join(self.work, name)
        os.makedirs(path, exist_ok=True)
        return path
