#!/usr/bin/python3
"""A stand-in for nvidia-smi that answers from the fake NVML's scenario: for the plumbing test
of the GPU check driver only (tests/gpu/plumbing_test.sh), never for a GPU result.

    fake_nvidia_smi.py -L
    fake_nvidia_smi.py --query-gpu=F1,F2,... --format=csv
    fake_nvidia_smi.py --query-compute-apps=pid,gpu_uuid,used_memory --format=csv

Reads $GENSCOPE_FAKE_NVML_SCENARIO (the JSON of tests/fake_nvml, docs/probes.md) and prints
what nvidia-smi prints (layout: tests/gpu/nvidia_smi.py), with the fake's semantics (free =
total - used; the last `used` value; processes with a numeric pid). Knobs for the driver's
failure paths: GENSCOPE_FAKE_SMI_UNKNOWN=field (refused as "not a valid field to query", as an
older nvidia-smi does) and GENSCOPE_FAKE_SMI_SKEW=field=+N (that value printed N higher).
"""

import json
import os
import sys

MIB = 1 << 20


def values(device, driver):
    used = device.get("used", [0])
    used = used[-1] if isinstance(used, list) else used
    total = device.get("total", 0)
    clocks = device.get("clocks", {})
    util = device.get("utilization", {})
    return {
        "uuid": device.get("uuid", ""), "name": device.get("name", ""),
        "driver_version": driver, "pci.bus_id": "00000000:00:00.0",
        "memory.total": f"{total // MIB} MiB",
        "memory.reserved": f"{device.get('reserved', 0) // MIB} MiB",
        "memory.used": f"{used // MIB} MiB", "memory.free": f"{(total - used) // MIB} MiB",
        "utilization.gpu": f"{util.get('gpu', 0)} %",
        "utilization.memory": f"{util.get('memory', 0)} %",
        "temperature.gpu": f"{device.get('temperature', 0)}",
        "power.draw": f"{device.get('power_mw', 0) / 1000:.2f} W",
        "clocks.current.sm": f"{clocks.get('sm', 0)} MHz",
        "clocks.current.memory": f"{clocks.get('mem', 0)} MHz",
    }


UNITS = {"memory.total": "MiB", "memory.reserved": "MiB", "memory.used": "MiB",
         "memory.free": "MiB", "utilization.gpu": "%", "utilization.memory": "%",
         "power.draw": "W", "clocks.current.sm": "MHz", "clocks.current.memory": "MHz",
         "used_memory": "MiB"}
HEADERS = {"used_memory": "used_gpu_memory"}


def skew(field, text):
    spec = os.environ.get("GENSCOPE_FAKE_SMI_SKEW", "")
    name, _, delta = spec.partition("=")
    if name != field or not delta:
        return text
    number, _, unit = text.partition(" ")
    return f"{float(number) + float(delta):g}" + (f" {unit}" if unit else "")


def main(argv):
    with open(os.environ["GENSCOPE_FAKE_NVML_SCENARIO"]) as f:
        scenario = json.load(f)
    devices = scenario.get("devices", [])
    driver = scenario.get("driver_version", "")
    if argv == ["-L"]:
        for i, d in enumerate(devices):
            print(f"GPU {i}: {d.get('name')} (UUID: {d.get('uuid')})")
        return 0
    query = next((a for a in argv if a.startswith("--query-")), None)
    if query is None or "--format=csv" not in argv:
        print("fake nvidia-smi: only -L and --query-gpu/--query-compute-apps --format=csv",
              file=sys.stderr)
        return 2
    kind, _, fields = query[len("--query-"):].partition("=")
    fields = fields.split(",")
    refused = os.environ.get("GENSCOPE_FAKE_SMI_UNKNOWN")
    if refused in fields:
        print(f'Field "{refused}" is not a valid field to query.\n')
        return 2
    print(", ".join(HEADERS.get(f, f) + (f" [{UNITS[f]}]" if f in UNITS else "")
                    for f in fields))
    if kind == "gpu":
        for i, d in enumerate(devices):
            row = values(d, driver)
            row["index"] = str(i)
            print(", ".join(skew(f, row[f]) for f in fields))
    else:
        for d in devices:
            for p in d.get("processes", []):
                if not isinstance(p.get("pid"), int):
                    continue  # "self" means the process that loads the fake NVML
                row = {"pid": str(p["pid"]), "gpu_uuid": d.get("uuid", ""),
                       "used_memory": f"{p.get('used', 0) // MIB} MiB"}
                print(", ".join(row[f] for f in fields))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
