"""`genscope run -- python3 child_pipeline.py` on a real CUDA pipeline: the child's GPU memory.

The child (child_pipeline.py) holds 1.5 GiB of CUDA memory while the checker reads
nvidia-smi's used_memory of the child's pid twice; genscope's figure for the watched process
tree (gpu<i>.tree_used_bytes, NVML's per-process list summed over the tree, docs/run.md) must
match it at its peak in the "denoise" step the child announced on the event channel, and the
run must have both announced steps. Skipped, saying so, while `genscope run` is not built
(branches "runproc" and "recognisers").
"""

import glob
import json
import os
import re
import subprocess
import time

import verdicts as v
from context import CheckFailed, CheckSkipped
from run_doc import metric, step_named


def run_command_child(ctx):
    # The subcommand list of `genscope --help` (`genscope run --help` prints the top-level
    # help and exits 0 where there is no `run`).
    listing = subprocess.run([ctx.cli, "--help"], capture_output=True, text=True, timeout=60)
    if not re.search(r"^\s+run\s", listing.stdout, re.MULTILINE):
        raise CheckSkipped("`genscope run` not built (branches runproc/recognisers)")
    device = ctx.need_cuda()
    index, matched = ctx.nvml_index(device)
    work = ctx.scratch("run-command")
    sync, out = os.path.join(work, "sync"), os.path.join(work, "out")
    for folder in (sync, out):
        os.makedirs(folder, exist_ok=True)
        for f in glob.glob(os.path.join(folder, "*")):
            os.remove(f)
    child = os.path.join(ctx.source_dir, "tests", "gpu", "child_pipeline.py")
    process = subprocess.Popen([ctx.cli, "run", "--out", out, "--quiet", "--interval", "10", "--max-interval", "10",
                                "--", ctx.python, child, sync],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=ctx.child_env())
    readings = []
    pid = None
    try:
        deadline = time.monotonic() + 180
        while not os.path.exists(os.path.join(sync, "ready")):
            if process.poll() is not None or time.monotonic() > deadline:
                raise CheckFailed("the child never held its memory: " +
                                  (process.stdout.read() if process.poll() is not None
                                   else "timed out")[-300:])
            time.sleep(0.05)
        with open(os.path.join(sync, "ready")) as f:
            pid = int(f.read())
        for _ in range(2):
            apps = ctx.smi_apps()
            mine = [a["used_memory"].value for a in apps if a["pid"].value == pid]
            readings.append(mine[0] if mine else None)
            time.sleep(0.2)
    finally:
        open(os.path.join(sync, "go"), "w").close()
        try:
            output, _ = process.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
    check = f"genscope run gpu{index}"
    rows = [v.equal(check, "exit status", process.returncode, 0,
                    note=(output or "").strip().splitlines()[-1][:120] if output else "")]
    documents = sorted(glob.glob(os.path.join(out, "run*.json")))
    if not documents:
        raise CheckFailed(f"no run document in {out}: {(output or '')[-300:]}")
    with open(documents[0]) as f:
        doc = json.load(f)
    names = [s.get("name") for s in doc.get("steps", [])]
    rows.append(v.holds(check, "announced steps", "load weights" in names and "denoise" in names,
                        ", ".join(map(str, names))[:60], "load weights, denoise",
                        "from the event channel"))
    if "denoise" not in names:
        return rows
    step = step_named(doc, "denoise")
    m = metric(step, f"gpu{index}.tree_used_bytes")
    if m is None:
        raise CheckFailed(f"step 'denoise' has no gpu{index}.tree_used_bytes (metrics: "
                          f"{sorted(x.get('name') for x in step.get('metrics', []))})")
    if all(r is None for r in readings):
        rows.append(v.failed(check, "tree_used_bytes", f"nvidia-smi does not list the child "
                                                       f"pid {pid} (a PID namespace?)"))
        return rows
    rows.append(v.mib(check, "tree_used_bytes peak (denoise)", m.get("peak"), readings,
                      note=f"child pid {pid}; NVML {index} by {matched}"))
    return rows
