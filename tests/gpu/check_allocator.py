"""The torch.cuda allocator probe against torch.cuda's own counters, exactly.

Three steps under a Python Monitor with the allocator probe of the current CUDA device:
- "known tensor": 256 MiB allocated, written and freed. allocated/reserved before, peak and
  after must equal torch.cuda.memory_allocated / max_memory_allocated / memory_reserved /
  max_memory_reserved read at the same points (the step resets torch's peaks at its start,
  so torch's max_* read just before the step ends is the step's peak), and the allocated
  peak must be the baseline plus the tensor's 268435456 bytes;
- "2 ms spike": 512 MiB held for 2 ms between 50 ms pauses, far shorter than the 10 ms
  sampling interval: the step's allocated peak is still torch's exact maximum;
- "outer" holding 128 MiB around "inner" (256 MiB, freed) and then 512 MiB more: each keeps
  its own peak. The independent peaks are torch.cuda.memory_allocated()/memory_reserved()
  read right after every allocation (a peak of a sequence of allocations is reached right
  after one of them, and reserved memory only grows inside an allocation).
"""

import time

import verdicts as v
from context import MIB
from run_doc import need_metric, step_named

FIGURES = (("allocated", "allocated_bytes"), ("reserved", "reserved_bytes"))


def _counters(torch, device):
    return {"allocated": torch.cuda.memory_allocated(device),
            "reserved": torch.cuda.memory_reserved(device)}


def _peaks(torch, device):
    return {"allocated": torch.cuda.max_memory_allocated(device),
            "reserved": torch.cuda.max_memory_reserved(device)}


def _compare_step(rows, check, step, device, before, peak, after):
    for key, figure in FIGURES:
        m = need_metric(step, f"alloc.cuda:{device}.{figure}")
        rows.append(v.equal(check, f"{key} before", m.get("before"), before[key], "B"))
        rows.append(v.equal(check, f"{key} peak", m.get("peak"), peak[key], "B",
                            note=f"peak_source {m.get('peak_source')}, peak_offset_ns "
                                 f"{m.get('peak_offset_ns')}"))
        rows.append(v.equal(check, f"{key} after", m.get("after"), after[key], "B"))
        rows.append(v.equal(check, f"{key} peak_source", m.get("peak_source"), "exact"))


def allocator_exactness(ctx):
    device = ctx.need_cuda()
    torch, genscope = ctx.torch, ctx.need_genscope()
    dev = f"cuda:{device}"
    torch.cuda.synchronize(device)
    monitor = genscope.Monitor(sample_interval_ms=10, max_sample_interval_ms=10, nvml=False)
    monitor.add_torch_cuda_allocator(device=device)
    run = monitor.start_run(pipeline="gpu-check", model="allocator")
    rows = []

    # 1. a known tensor
    tensor_bytes = 256 * MIB
    before = _counters(torch, device)
    with run.step("custom", "known tensor"):
        x = torch.empty(tensor_bytes, dtype=torch.uint8, device=dev)
        x.fill_(1)
        torch.cuda.synchronize(device)
        del x
        torch.cuda.synchronize(device)
        peak = _peaks(torch, device)
    after = _counters(torch, device)
    known = (before, peak, after)

    # 2. a 2 ms spike inside a 100 ms step sampled every 10 ms
    spike_before = _counters(torch, device)
    with run.step("custom", "2 ms spike"):
        time.sleep(0.05)
        y = torch.empty(512 * MIB, dtype=torch.uint8, device=dev)
        held_from = time.perf_counter()
        while time.perf_counter() - held_from < 0.002:
            pass
        del y
        time.sleep(0.05)
        spike_peak = _peaks(torch, device)
    spike_after = _counters(torch, device)

    # 3. nested steps
    outer_before = _counters(torch, device)
    outer_seen = []
    with run.step("custom", "outer"):
        a = torch.empty(128 * MIB, dtype=torch.uint8, device=dev)
        outer_seen.append(_counters(torch, device))
        inner_before = _counters(torch, device)
        with run.step("custom", "inner"):
            b = torch.empty(256 * MIB, dtype=torch.uint8, device=dev)
            inner_seen = [_counters(torch, device)]
            del b
            inner_peak_torch = _peaks(torch, device)
        inner_after = _counters(torch, device)
        c = torch.empty(512 * MIB, dtype=torch.uint8, device=dev)
        outer_seen.append(_counters(torch, device))
        del c, a
    outer_after = _counters(torch, device)
    doc = run.finish()

    _compare_step(rows, "allocator: known tensor", step_named(doc, "known tensor"), device, *known)
    m = need_metric(step_named(doc, "known tensor"), f"alloc.cuda:{device}.allocated_bytes")
    rows.append(v.equal("allocator: known tensor", "allocated peak - before",
                        None if m.get("peak") is None or m.get("before") is None
                        else m["peak"] - m["before"], tensor_bytes, "B",
                        note="the tensor's nbytes"))

    _compare_step(rows, "allocator: 2 ms spike", step_named(doc, "2 ms spike"), device,
                  spike_before, spike_peak, spike_after)
    m = need_metric(step_named(doc, "2 ms spike"), f"alloc.cuda:{device}.allocated_bytes")
    rows.append(v.at_least("allocator: 2 ms spike", "allocated peak - before",
                           None if m.get("peak") is None else m["peak"] - m["before"],
                           512 * MIB, "B", note="the 512 MiB spike"))

    inner_expected = {k: max(s[k] for s in inner_seen) for k in ("allocated", "reserved")}
    rows.append(v.equal("allocator: nested", "inner expected peak = torch max",
                        inner_expected["allocated"], inner_peak_torch["allocated"], "B",
                        note="the independent method agrees with torch's own maximum"))
    _compare_step(rows, "allocator: inner", step_named(doc, "inner"), device, inner_before,
                  inner_expected, inner_after)
    outer_expected = {k: max(s[k] for s in outer_seen + inner_seen)
                      for k in ("allocated", "reserved")}
    _compare_step(rows, "allocator: outer", step_named(doc, "outer"), device, outer_before,
                  outer_expected, outer_after)
    return rows
