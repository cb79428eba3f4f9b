"""The GPU checks behind scripts/gpu-check: runs every check, prints the table, exits 1 on a
failure. Run it through scripts/gpu-check, which builds what it names; docs/gpu.md lists the
checks and their tolerances.

    python3 tests/gpu/gpu_check.py --cli build-gpu/tools/genscope/genscope \\
        --pythonpath build-gpu/python --nvidia-smi nvidia-smi --out OUT [--bench ...]
        [--shim ...] [--torch-cli ...] [--torch-status TEXT] [--plumbing]

--plumbing marks a run against the fake NVML and a fake nvidia-smi (the test suite's run of
the driver itself): every line printed then says it is no GPU result.
"""

import argparse
import datetime
import json
import os
import platform
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import check_allocator  # noqa: E402
import check_demo  # noqa: E402
import check_failures  # noqa: E402
import check_instrument  # noqa: E402
import check_nvml  # noqa: E402
import check_run_command  # noqa: E402
import check_sampler  # noqa: E402
import verdicts as v  # noqa: E402
from context import CheckFailed, CheckSkipped, Context  # noqa: E402
from nvidia_smi import NvidiaSmiError  # noqa: E402
from table import render_table, summary  # noqa: E402

# In this order: the NVML comparison wants an idle GPU, before this process touches CUDA.
CHECKS = [
    ("nvml vs nvidia-smi", check_nvml.nvml_against_nvidia_smi),
    ("sampler cost", check_sampler.sample_cost),
    ("nvml unsupported call", check_failures.nvml_unsupported_call),
    ("allocator exactness", check_allocator.allocator_exactness),
    ("process memory vs compute-apps", check_nvml.process_memory_against_compute_apps),
    ("sampler plateau", check_sampler.sampler_plateau),
    ("cuda out of memory", check_failures.cuda_out_of_memory),
    ("instrument() on CUDA", check_instrument.instrument_on_cuda),
    ("genscope run child", check_run_command.run_command_child),
    ("demo --device cuda", check_demo.demo_on_cuda),
]

PLUMBING_BANNER = ("PLUMBING TEST: fake NVML and a fake nvidia-smi, no GPU. "
                   "Nothing below is a GPU result.")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cli", required=True, help="genscope CLI of the GPU build")
    p.add_argument("--pythonpath", required=True, help="folder holding the genscope package")
    p.add_argument("--nvidia-smi", required=True, help="nvidia-smi to compare with")
    p.add_argument("--out", required=True, help="folder for table.txt and results.json")
    p.add_argument("--work", help="scratch folder (default: OUT/work)")
    p.add_argument("--bench", help="probes_bench (sampler cost)")
    p.add_argument("--shim", help="libnvml_shim.so (unsupported-call check)")
    p.add_argument("--torch-cli", help="genscope CLI with the LibTorch integration (demo)")
    p.add_argument("--torch-status", help="why there is no --torch-cli")
    p.add_argument("--source-dir", default=os.path.dirname(os.path.dirname(HERE)))
    p.add_argument("--only", action="append", default=[],
                   help="run only the checks whose name contains this (repeatable)")
    p.add_argument("--plumbing", action="store_true", help=PLUMBING_BANNER)
    args = p.parse_args(argv)
    args.work = args.work or os.path.join(args.out, "work")
    return args


def run_checks(ctx, only):
    rows, problems = [], []
    for name, check in CHECKS:
        if only and not any(o in name for o in only):
            continue
        print(f"gpu-check: {name} ...", flush=True)
        try:
            rows.extend(check(ctx))
        except CheckSkipped as e:
            rows.append(v.skipped(name, str(e)))
        except CheckFailed as e:
            rows.append(v.failed(name, "-", str(e)))
        except NvidiaSmiError as e:
            rows.append(v.failed(name, "-", f"nvidia-smi: {e}"))
        except Exception as e:  # a check that broke: its own failure, the others go on
            rows.append(v.failed(name, "-", f"raised {type(e).__name__}: {e}"))
            problems.append({"check": name, "traceback": traceback.format_exc()})
    return rows, problems


def header(ctx):
    lines = [f"genscope GPU check, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC"]
    if ctx.plumbing:
        lines.insert(0, PLUMBING_BANNER)
    try:
        nvml = ctx.probe().get("probes", {}).get("nvml", {})
        for g in nvml.get("gpus", []):
            lines.append(f"GPU {g.get('index')}: {g.get('name')}, driver {g.get('driver_version')}, "
                         f"{g.get('total_bytes', 0) / (1 << 30):.1f} GiB")
        if not nvml.get("gpus"):
            lines.append(f"NVML: {nvml.get('error', 'no GPU')}")
    except Exception as e:
        lines.append(f"genscope probe failed: {e}")
    torch = ctx.torch
    lines.append(f"host {platform.node()}, {platform.platform()}, Python {platform.python_version()}"
                 f", torch {torch.__version__ if torch else 'absent (' + ctx.torch_error + ')'}"
                 + (f", CUDA {torch.version.cuda}" if torch and torch.version.cuda else ""))
    return lines


def main(argv=None):
    args = parse_args(argv if argv is not None else sys.argv[1:])
    os.makedirs(args.out, exist_ok=True)
    ctx = Context(args)
    ctx.load_modules()
    top = header(ctx)
    rows, problems = run_checks(ctx, args.only)
    text = "\n".join(top) + "\n\n" + render_table(rows) + "\n" + summary(rows) + "\n"
    if ctx.plumbing:
        text += PLUMBING_BANNER + "\n"
    print(text, end="")
    with open(os.path.join(args.out, "table.txt"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"header": top, "plumbing": ctx.plumbing,
                   "rows": [r.as_dict() for r in rows], "problems": problems}, f, indent=1)
    for p in problems:
        print(f"\n{p['check']}:\n{p['traceback']}", file=sys.stderr)
    return 1 if any(r.verdict == v.FAIL for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
