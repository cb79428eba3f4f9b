#!/usr/bin/python3
"""Writes a run document that exercises every corner of the exports (HTML, trace, CSV).

  make_export_run.py OUT.json [--samples N] [--id HEX] [--shift NS]

- steps that nest, one that overlaps its parent without nesting (async track in the trace),
  a step on a second thread, a zero-length step, a failed step with a fallback chain, a
  sampling step with 20,000 iterations (more than the trace's default 10,000 slices);
- names with a comma, double quotes, a newline, "</script>" and non-ASCII characters;
- N samples (default 100,000) of process RSS with one one-sample spike, GPU memory with a gap
  (null samples), system memory, RAM use in percent and a GPU temperature;
- tensor (with a failed check), lora_application (seed 002 layout), performance and an
  unknown attachment type.
Deterministic: the same arguments give the same bytes.
"""
import argparse
import json

TRICKY = 'decode, "tiled"\nsecond line </script><script>alert(1)</script> é ✓'


def metric(name, unit, before, peak, after, peak_offset, source="exact"):
    return {"name": name, "unit": unit, "before": before, "peak": peak, "after": after,
            "peak_offset_ns": peak_offset, "peak_source": source}


def step(i, name, kind, start, duration, parent=-1, thread=0, status="ok", **extra):
    s = {"id": i, "parent_id": parent, "name": name, "kind": kind, "status": status,
         "source": "", "thread": thread, "start_offset_ns": start, "duration_ns": duration,
         "metrics": [metric("process.rss_bytes", "bytes", 1e8 + i * 1e6, 2e8 + i * 1e6,
                            1.5e8 + i * 1e6, duration // 2),
                     metric("gpu0.used_bytes", "bytes", 1e9, 3e9 + i * 1e7, 2e9, -1)],
         "attempts": [], "counters": {}, "labels": {}, "attachments": []}
    s.update(extra)
    return s


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--samples", type=int, default=100000)
    p.add_argument("--id", default="00000000000000000000000000000abc")
    p.add_argument("--shift", type=int, default=0, help="added to every sampled value")
    a = p.parse_args()
    ms = 1000000
    steps = [
        step(0, "load models", "model_loading", 0, 200 * ms),
        step(1, "load unet", "model_loading", 10 * ms, 150 * ms, parent=0),
        # Opened inside "load models" but ends after it: overlaps without nesting.
        step(2, "prefetch vae", "custom", 150 * ms, 100 * ms, parent=0),
        step(3, "apply lora", "lora_application", 260 * ms, 40 * ms, attachments=[{
            "type": "lora_application", "name": "style.safetensors", "data": {
                "schema": "genscope.lora_application/1",
                "lora_file": {"filename": "style.safetensors", "path": "/loras/style.safetensors",
                              "file_exists": True, "file_size_bytes": 151000000},
                "lora_application_success": True,
                "unet_lora_patches": {"total_patched_keys": 264, "patch_details": {}},
                "unet_weight_changes": {"values_changed": 264, "keys_common": 1680,
                                        "keys_added": 0, "keys_removed": 0},
                "fit": {"lora_architecture": "SDXL", "base_architecture": "SDXL",
                        "verdict": "264 of 266 modules load onto this SDXL base",
                        "matched_count": 264, "lora_key_not_loaded_count": 2,
                        "not_loaded_count": 0, "shape_mismatch_count": 0,
                        "base_keys": 1680, "base_weights_patched": 264,
                        "lora_key_not_loaded": ["lora_te_text_projection", "lora_unet_extra"],
                        "not_loaded": [], "shape_mismatches": []},
                "errors": []}}]),
        step(4, "encode prompt", "text_encoding", 300 * ms, 50 * ms, thread=1,
             counters={"characters": 120, "tokens": 31}, attachments=[{
                 "type": "tensor", "name": "conditioning", "data": {
                     "role": "conditioning", "shape": [1, 77, 2048], "dtype": "F16",
                     "device": "cuda:0",
                     "stats": {"bytes": 315392, "numel": 157696, "min": -4.5, "max": 5.25,
                               "mean": 0.01, "std": 1.0, "abs_max": 5.25, "nan_count": 3,
                               "pos_inf_count": 0, "neg_inf_count": 0, "zero_count": 12},
                     "classification": {"family": "SDXL", "kind": "conditioning"},
                     "flags": [{"name": "nan", "message": "3 NaN values"}],
                     "checks": [{"name": "finite", "passed": False, "reason": "3 NaN"},
                                {"name": "dtype", "passed": True, "reason": "F16"}]}}]),
        step(5, "sampling", "sampling", 350 * ms, 1000 * ms,
             iterations={"durations_ns": [40000 + (k * 7919) % 9000 + (300000 if k == 0 else 0)
                                          for k in range(20000)]}),
        step(6, TRICKY, "vae_decode", 1350 * ms, 120 * ms, status="failed",
             error={"type": "std::runtime_error", "message": "out of memory, \"tiled\" failed"},
             attempts=[{"strategy": "direct", "outcome": "failed", "error": "OOM",
                        "duration_ns": 30 * ms},
                       {"strategy": "tiled", "outcome": "failed", "error": "OOM, again",
                        "duration_ns": 50 * ms},
                       {"strategy": "cpu", "outcome": "ok", "error": "", "duration_ns": 30 * ms}]),
        step(7, "decode tile", "custom", 1360 * ms, 20 * ms, parent=6),
        step(8, "marker", "custom", 1480 * ms, 0),
        step(9, "save", "save", 1480 * ms, 20 * ms, labels={"format": "png"}),
    ]
    duration = 1500 * ms
    n = a.samples
    offsets = [k * duration // n for k in range(n)]
    rss = [1e8 + (k % 1000) * 1e4 + a.shift for k in range(n)]
    rss[n // 3] = 9e8  # one-sample spike
    gpu = [None if n // 2 <= k < n // 2 + n // 100 else 2e9 + (k % 500) * 1e5 + a.shift
           for k in range(n)]
    used = [4e9 + (k % 97) * 1e6 for k in range(n)]
    percent = [v / 16e9 * 100 for v in used]
    temp = [50 + (k % 20) for k in range(n)]
    run = {
        "schema": "genscope.run/1", "id": a.id, "start_utc": "2026-11-21T12:00:00.000Z",
        "start_unix_ns": 1795262400000000000, "duration_ns": duration,
        "genscope_version": "0.1.0",
        "host": {"hostname": "export-host", "cpu_model": "Test CPU", "cpu_cores": 8,
                 "ram_bytes": 16e9, "os": "Linux 6.1"},
        "gpus": [{"index": 0, "name": "Fake H200", "uuid": "GPU-fake", "driver_version": "550",
                  "total_bytes": 150e9}],
        "pipeline": {"name": "export test", "model": "sdxl", "architecture": "UNet",
                     "parameters": {"steps": "30", "resolution": "1024x1024"}},
        "labels": {"variant": "a"}, "probes": ["process", "system", "nvml"],
        "notes": ["a note, with a comma"],
        "steps": steps,
        "series": {"interval_ns": 1000000, "samples_taken": n, "capacity": n,
                   "metrics": [{"name": "process.rss_bytes", "unit": "bytes"},
                               {"name": "gpu0.used_bytes", "unit": "bytes"},
                               {"name": "system.used_bytes", "unit": "bytes"},
                               {"name": "system.used_percent", "unit": "percent"},
                               {"name": "gpu0.temperature_celsius", "unit": "celsius"}],
                   "offset_ns": offsets, "values": [rss, gpu, used, percent, temp]},
        "monitoring_errors": [{"source": "nvml", "message": "temperature read failed",
                               "offset_ns": 5 * ms, "step": "load models"}],
        "attachments": [
            {"type": "performance", "name": "performance", "data": {
                "architecture": "UNet", "met": False, "score": 71.5,
                "results": [{"scope": "run", "target": "max_duration", "limit": 1e9,
                             "actual": 1.5e9, "met": False, "score": 66.7},
                            {"scope": "sampling", "target": "min_it_per_s", "limit": 10,
                             "actual": 20.1, "met": True, "score": 100}],
                "diagnostics": [{"id": "dominant_step", "step": "sampling",
                                 "message": "sampling takes 67% of the run", "evidence": {}}],
                "recommendations": [{"diagnostic": "dominant_step", "step": "sampling",
                                     "text": "use fewer steps", "evidence": {}}]}},
            {"type": "custom_thing", "name": "extra", "data": {"answer": 42}}],
    }
    with open(a.out, "w") as f:
        json.dump(run, f)


if __name__ == "__main__":
    main()
