"""NVML figures against nvidia-smi: per GPU, and this process's GPU memory.

`genscope probe --json` samples every NVML figure once; nvidia-smi is asked the same
questions just before and just after, so a counter that moves while genscope reads it is
judged against the bracket of the two readings (tolerances: docs/gpu.md).
"""

import os
import time

import verdicts as v
from context import GPU_QUERY, MIB, CheckFailed
from run_doc import metric

# nvidia-smi field -> (genscope figure, scale to nvidia-smi's unit, rule, tolerance)
BRACKETED = [
    ("utilization.gpu", "utilization_percent", 1, 5, "%"),
    ("utilization.memory", "memory_utilization_percent", 1, 5, "%"),
    ("temperature.gpu", "temperature_celsius", 1, 1, "C"),
    ("clocks.current.sm", "sm_clock_hertz", 1e-6, 15, "MHz"),
    ("clocks.current.memory", "memory_clock_hertz", 1e-6, 15, "MHz"),
]
MEMORY = [("memory.total", "total_bytes"), ("memory.reserved", "reserved_bytes"),
          ("memory.used", "used_bytes"), ("memory.free", "free_bytes")]


def _value(rows_by_uuid, uuid, field):
    row = rows_by_uuid.get(uuid)
    return None if row is None or field not in row else row[field].value


def nvml_against_nvidia_smi(ctx):
    before, dropped = ctx.smi_gpus()
    t0 = time.monotonic()
    probe = ctx.probe(refresh=True)
    t1 = time.monotonic()
    after, _ = ctx.smi_gpus([f for f in GPU_QUERY if f not in dropped])
    nvml = probe.get("probes", {}).get("nvml", {})
    if not nvml.get("available"):
        raise CheckFailed(f"genscope's NVML probe did not open: {nvml.get('error', '?')}")
    gpus = nvml.get("gpus", [])
    metrics = nvml.get("metrics", {})
    rows = [v.equal("nvml", "GPU count", len(gpus), len(before),
                    note=f"genscope probe took {t1 - t0:.2f} s between the two nvidia-smi reads")]
    if nvml.get("error"):
        rows.append(v.info("nvml", "probe error text", nvml["error"]))
    s_before = {r["uuid"].value: r for r in before}
    s_after = {r["uuid"].value: r for r in after}
    for g in gpus:
        uuid = g.get("uuid", "")
        check = f"nvml gpu{g.get('index')}"
        if uuid not in s_before:
            rows.append(v.failed(check, "uuid", f"genscope's UUID {uuid} not in nvidia-smi's "
                                                f"{sorted(s_before)}"))
            continue
        rows.append(v.equal(check, "uuid", uuid, uuid))
        rows.append(v.equal(check, "index", g.get("index"), _value(s_before, uuid, "index")))
        rows.append(v.equal(check, "name", g.get("name"), _value(s_before, uuid, "name")))
        rows.append(v.equal(check, "driver_version", g.get("driver_version"),
                            _value(s_before, uuid, "driver_version")))

        def figure(name):
            entry = metrics.get(f"gpu{g['index']}.{name}")
            return None if entry is None else entry.get("value")

        reserved = figure("reserved_bytes")
        for field, name in MEMORY:
            if field in dropped:
                rows.append(v.skipped(f"{check} {field}", "this nvidia-smi does not know the "
                                                          "field"))
                continue
            readings = [_value(s_before, uuid, field), _value(s_after, uuid, field)]
            g_value = figure(name)
            note = ""
            if field == "memory.used" and reserved is None and "memory.reserved" not in dropped:
                # NVML v1 fallback: its `used` includes the reserved memory.
                readings = [None if u is None or r is None else u + r for u, r in
                            zip(readings, [_value(s_before, uuid, "memory.reserved"),
                                           _value(s_after, uuid, "memory.reserved")])]
                note = "v1 memory call: genscope's used includes reserved"
            if field == "memory.total":
                rows.append(v.mib(check, "total_bytes", figure("total_bytes"), readings, note))
                rows.append(v.mib(check, "gpus[].total_bytes", g.get("total_bytes"), readings))
            else:
                rows.append(v.mib(check, name, g_value, readings, note))
        for field, name, scale, tolerance, unit in BRACKETED:
            g_value = figure(name)
            rows.append(v.bracket(check, name, None if g_value is None else g_value * scale,
                                  [_value(s_before, uuid, field), _value(s_after, uuid, field)],
                                  tolerance, unit))
        readings = [_value(s_before, uuid, "power.draw"), _value(s_after, uuid, "power.draw")]
        known = [r for r in readings if r is not None]
        tolerance = max(5.0, 0.05 * max(known)) if known else 5.0
        rows.append(v.bracket(check, "power_watts", figure("power_watts"), readings,
                              round(tolerance, 2), "W"))
    return rows


def process_memory_against_compute_apps(ctx):
    """This process holds a known CUDA allocation; genscope's gpu<i>.process_used_bytes
    (nvmlDeviceGetComputeRunningProcesses_v3, our pid) against nvidia-smi's used_memory of
    the same pid, read just before and just after the step's end sample."""
    device = ctx.need_cuda()
    torch, genscope = ctx.torch, ctx.need_genscope()
    index, matched = ctx.nvml_index(device)
    x = torch.empty(1024 * MIB, dtype=torch.uint8, device=f"cuda:{device}")
    x.fill_(7)
    torch.cuda.synchronize(device)
    monitor = genscope.Monitor(sample_interval_ms=50, max_sample_interval_ms=50)
    run = monitor.start_run(pipeline="gpu-check", model="process-memory")
    with run.step("custom", "hold 1 GiB"):
        time.sleep(0.2)
        apps_before = ctx.smi_apps()
    apps_after = ctx.smi_apps()
    reserved = torch.cuda.memory_reserved(device)
    doc = run.finish()
    del x
    pid = os.getpid()
    readings = []
    for apps in (apps_before, apps_after):
        mine = [a for a in apps if a["pid"].value == pid]
        readings.append(mine[0]["used_memory"].value if mine else None)
    step = doc["steps"][0]
    m = metric(step, f"gpu{index}.process_used_bytes")
    if m is None:
        raise CheckFailed(f"no gpu{index}.process_used_bytes in the step: "
                          f"{[e['message'] for e in doc['monitoring_errors']][:3]}")
    check = f"process memory gpu{index}"
    rows = []
    if all(r is None for r in readings):
        listed = sorted({a["pid"].value for a in apps_before + apps_after})
        rows.append(v.failed(check, "process_used_bytes",
                             f"nvidia-smi does not list this pid {pid} (it lists {listed}): "
                             f"a PID namespace? genscope read {m.get('after')}"))
        return rows
    rows.append(v.mib(check, "process_used_bytes (step end)", m.get("after"), readings,
                      note=f"pid {pid}; CUDA device {device} = NVML {index} by {matched}"))
    rows.append(v.at_least(check, "process_used_bytes >= torch reserved", m.get("after"),
                           float(reserved), "B",
                           note="the allocator's reserved memory lies inside the process's"))
    return rows

