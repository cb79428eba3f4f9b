"""Failure paths on real hardware: an NVML call the GPU does not support, and CUDA running
out of memory inside a step.

Unsupported call: first every call genscope makes, and nvmlDeviceGetFanSpeed, is asked of the
NVML library directly (ctypes), and the answers are listed. If one of genscope's own calls is
unsupported on this GPU, a run on the real library must record it once, with "(no longer
queried)", and go on. If none is (the H100 and H200 support them all), the call is provoked:
genscope loads tests/gpu/nvml_shim.cpp, which forwards everything to the real library but
answers nvmlDeviceGetPowerUsage with the driver's own answer to nvmlDeviceGetFanSpeed (these
GPUs have no fan: NOT_SUPPORTED from the driver). Either way the run, in a child process,
must finish, write its document, keep its step ok and its other GPU figures, and record the
error exactly once.

Out of memory: a step allocates 64 MiB, then twice the GPU's memory. The step must be failed
with torch's OutOfMemoryError and its message, the run must go on (a later step ok) and its
document must be written and read back, and the step's allocator figures must equal
torch.cuda's counters read right after the exception.
"""

import ctypes
import json
import subprocess
import textwrap

import verdicts as v
from context import MIB, CheckFailed, CheckSkipped
from run_doc import errors_from, metric, need_metric, step_named

NVML_SUCCESS, NVML_ERROR_NOT_SUPPORTED = 0, 3
REFUSED = "nvmlDeviceGetPowerUsage"
GENSCOPE_CALLS = [  # (name, call(lib, device) -> rc); the probe's calls, in its order
    ("nvmlDeviceGetMemoryInfo_v2", None),
    ("nvmlDeviceGetUtilizationRates", lambda lib, d: lib.nvmlDeviceGetUtilizationRates(
        d, ctypes.byref((ctypes.c_uint * 2)()))),
    ("nvmlDeviceGetTemperature", lambda lib, d: lib.nvmlDeviceGetTemperature(
        d, 0, ctypes.byref(ctypes.c_uint()))),
    ("nvmlDeviceGetPowerUsage", lambda lib, d: lib.nvmlDeviceGetPowerUsage(
        d, ctypes.byref(ctypes.c_uint()))),
    ("nvmlDeviceGetClockInfo(SM)", lambda lib, d: lib.nvmlDeviceGetClockInfo(
        d, 1, ctypes.byref(ctypes.c_uint()))),
    ("nvmlDeviceGetClockInfo(MEM)", lambda lib, d: lib.nvmlDeviceGetClockInfo(
        d, 2, ctypes.byref(ctypes.c_uint()))),
    ("nvmlDeviceGetComputeRunningProcesses_v3", lambda lib, d:
        lib.nvmlDeviceGetComputeRunningProcesses_v3(d, ctypes.byref(ctypes.c_uint(0)), None)),
    ("nvmlDeviceGetFanSpeed", lambda lib, d: lib.nvmlDeviceGetFanSpeed(
        d, ctypes.byref(ctypes.c_uint()))),
]


def _memory_v2(lib, device):
    buffer = (ctypes.c_ubyte * 40)()
    ctypes.c_uint.from_buffer(buffer).value = 40 | 2 << 24  # nvmlMemory_v2 version word
    return lib.nvmlDeviceGetMemoryInfo_v2(device, ctypes.byref(buffer))


def driver_answers(path):
    """{call: (rc, text)} for GPU 0, asked of the NVML library directly."""
    lib = ctypes.CDLL(path)
    lib.nvmlErrorString.restype = ctypes.c_char_p
    if lib.nvmlInit_v2() != NVML_SUCCESS:
        raise CheckFailed(f"nvmlInit_v2 failed on {path}")
    try:
        device = ctypes.c_void_p()
        rc = lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(device))
        if rc != NVML_SUCCESS:
            raise CheckFailed(f"nvmlDeviceGetHandleByIndex_v2(0) = {rc}")
        answers = {}
        for name, call in GENSCOPE_CALLS:
            symbol = name.split("(")[0]
            if not hasattr(lib, symbol):
                answers[name] = (None, "symbol absent")
                continue
            rc = _memory_v2(lib, device) if call is None else call(lib, device)
            if name.endswith("_v3") and rc == 7:  # INSUFFICIENT_SIZE: the sizing call worked
                rc = NVML_SUCCESS
            answers[name] = (rc, lib.nvmlErrorString(rc).decode(errors="replace"))
        return answers
    finally:
        lib.nvmlShutdown()


CHILD = textwrap.dedent("""
    import json, sys, time
    import genscope
    monitor = genscope.Monitor(sample_interval_ms=10, max_sample_interval_ms=10)
    run = monitor.start_run(pipeline="gpu-check", model="nvml-unsupported")
    with run.step("custom", "work while a call is refused"):
        time.sleep(0.3)
    with run.step("custom", "later step"):
        time.sleep(0.1)
    doc = run.finish()
    genscope.write_run(doc, sys.argv[1])
""")


def nvml_unsupported_call(ctx):
    ctx.need_genscope()  # the child imports it
    answers = driver_answers(ctx.nvml_library)
    label = "fake NVML (plumbing)" if ctx.plumbing else ctx.nvml_library
    rows = [v.info("nvml unsupported: driver", name, f"{rc} {text}" if rc is not None else text,
                   note=label) for name, (rc, text) in answers.items()]
    natural = [n for n, (rc, _) in answers.items()
               if rc == NVML_ERROR_NOT_SUPPORTED and n != "nvmlDeviceGetFanSpeed"]
    env = {}
    if natural:
        refused, how = natural[0], "unsupported by this GPU itself"
    else:
        if not ctx.shim:
            raise CheckSkipped("no genscope call is unsupported here and the NVML shim is not "
                               "built (target nvml_shim)")
        refused = REFUSED
        fan = answers.get("nvmlDeviceGetFanSpeed", (None, ""))
        how = (f"provoked: the shim answers {REFUSED} with the driver's answer to "
               f"nvmlDeviceGetFanSpeed ({fan[1]})" if fan[0] not in (None, NVML_SUCCESS)
               else f"provoked: the shim answers {REFUSED} with a made-up NOT_SUPPORTED")
        env = {"GENSCOPE_NVML_LIBRARY": ctx.shim, "GENSCOPE_NVML_SHIM_TARGET": ctx.nvml_library,
               "GENSCOPE_NVML_SHIM_UNSUPPORTED": REFUSED}
    path = f"{ctx.scratch('nvml-unsupported')}/run.json"
    done = subprocess.run([ctx.python, "-c", CHILD, path], env=ctx.child_env(**env),
                          capture_output=True, text=True, timeout=120)
    check = "nvml unsupported"
    rows.append(v.holds(check, "run finished, document written", done.returncode == 0,
                        f"exit {done.returncode}", "exit 0", "child process",
                        note=(done.stderr.strip().splitlines() or [""])[-1][:200]))
    if done.returncode != 0:
        return rows
    with open(path) as f:
        doc = json.load(f)
    base = refused.split("(")[0]
    nvml_errors = errors_from(doc, "nvml")
    mentioning = [e for e in nvml_errors if base in e.get("message", "")]
    rows.append(v.equal(check, f"errors naming {refused}", len(mentioning), 1,
                        note=how + "; " + "; ".join(e["message"] for e in mentioning)[:200]))
    rows.append(v.holds(check, "recorded as no longer queried",
                        any("(no longer queried)" in e["message"] for e in mentioning),
                        "yes" if any("(no longer queried)" in e["message"]
                                     for e in mentioning) else "no",
                        "'(no longer queried)'", "message text"))
    for name in ("work while a call is refused", "later step"):
        step = step_named(doc, name)
        rows.append(v.equal(check, f"step '{name}' status", step.get("status"), "ok"))
    step = step_named(doc, "work while a call is refused")
    figure = {"nvmlDeviceGetPowerUsage": "power_watts",
              "nvmlDeviceGetTemperature": "temperature_celsius",
              "nvmlDeviceGetUtilizationRates": "utilization_percent"}.get(base)
    if figure:
        m = metric(step, f"gpu0.{figure}")
        rows.append(v.holds(check, f"gpu0.{figure} null", m is not None and m.get("after") is None,
                            str(None if m is None else m.get("after")), "null",
                            "the refused figure"))
    m = need_metric(step, "gpu0.used_bytes")
    rows.append(v.holds(check, "gpu0.used_bytes still read", m.get("after") is not None,
                        str(m.get("after")), "a number", "the other figures go on"))
    return rows


def cuda_out_of_memory(ctx):
    device = ctx.need_cuda()
    torch, genscope = ctx.torch, ctx.need_genscope()
    dev = f"cuda:{device}"
    total = torch.cuda.get_device_properties(device).total_memory
    monitor = genscope.Monitor(sample_interval_ms=10, max_sample_interval_ms=10)
    monitor.add_torch_cuda_allocator(device=device)
    run = monitor.start_run(pipeline="gpu-check", model="oom")
    keep = torch.empty(256 * MIB, dtype=torch.uint8, device=dev)
    before = (torch.cuda.memory_allocated(device), torch.cuda.memory_reserved(device))
    caught = None
    held = None
    try:
        with run.step("vae_decode", "out of memory"):
            held = torch.empty(64 * MIB, dtype=torch.uint8, device=dev)
            torch.empty(2 * total, dtype=torch.uint8, device=dev)
    except Exception as e:  # torch.OutOfMemoryError (torch.cuda.OutOfMemoryError)
        caught = e
    expected = {"allocated": (before[0], torch.cuda.max_memory_allocated(device),
                              torch.cuda.memory_allocated(device)),
                "reserved": (before[1], torch.cuda.max_memory_reserved(device),
                             torch.cuda.memory_reserved(device))}
    with run.step("custom", "after the failure"):
        torch.ones(1024, device=dev).sum().item()
    doc = run.finish()
    path = f"{ctx.scratch('oom')}/run.json"
    genscope.write_run(doc, path)
    back = genscope.read_run(path)
    del keep, held
    torch.cuda.empty_cache()
    check = "cuda oom"
    rows = [v.holds(check, "torch raised", caught is not None and "OutOfMemoryError" in
                    type(caught).__name__, type(caught).__name__ if caught else "nothing",
                    "OutOfMemoryError", "the pipeline's exception")]
    step = step_named(doc, "out of memory")
    error = step.get("error") or {}
    rows.append(v.equal(check, "step status", step.get("status"), "failed"))
    rows.append(v.holds(check, "error.type", "OutOfMemoryError" in error.get("type", ""),
                        error.get("type", ""), "*OutOfMemoryError", "contains"))
    message = str(caught) if caught else ""
    rows.append(v.holds(check, "error.message", bool(message) and
                        error.get("message", "") == message and "out of memory" in message,
                        error.get("message", "")[:60], "str(exception)", "equal, says out of memory"))
    rows.append(v.equal(check, "later step status",
                        step_named(doc, "after the failure").get("status"), "ok"))
    rows.append(v.equal(check, "document read back: steps", len(back.get("steps", [])),
                        len(doc.get("steps", []))))
    for key in ("allocated", "reserved"):
        m = need_metric(step, f"alloc.cuda:{device}.{key}_bytes")
        for field, value in zip(("before", "peak", "after"), expected[key]):
            rows.append(v.equal(check, f"{key} {field}", m.get(field), value, "B"))
    return rows
