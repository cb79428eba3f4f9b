#!/usr/bin/python3
"""compare_sdcpp.py RUN.json OUTPUT.txt: genscope's steps of one stable-diffusion.cpp run (sd-cli,
or tests/peers/sdcpp_drive.py through the Python binding) against what the library printed
about itself (its "completed, taking" times, its per-step bar times, its LoRA lines):
durations within 2 % or 50 ms, lazy loads and LoRA applications nested in the phase that
triggered them, sampling not inside the load, a save step, a sound tree."""
import re
import sys

from check_steps import check_tree, close, done, fail, load, parent_name

run = load(sys.argv[1])
out = open(sys.argv[2], errors="replace").read()
steps = run["steps"]
check_tree(run, "sd-cli")
by_name = {}
for s in steps:
    by_name.setdefault(s["name"], []).append(s)


def one(name):
    got = by_name.get(name, [])
    if len(got) != 1:
        fail(f"expected one step '{name}', got {len(got)}")
        return None
    return got[0]


def printed(pattern):
    return [float(x) for x in re.findall(pattern, out)]


for name, pattern in (("get_learned_condition", r"get_learned_condition completed, taking ([0-9.]+)s"),
                      ("sampling", r"sampling completed, taking ([0-9.]+)s"),
                      ("decode_first_stage", r"decode_first_stage completed, taking ([0-9.]+)s")):
    s = one(name)
    p = printed(pattern)
    if s and len(p) == 1:
        close(s["duration_ns"] / 1e9, p[0], name)
        if parent_name(run, s) is not None:
            fail(f"{name} is inside '{parent_name(run, s)}', not top level")
sampling = one("sampling")
if sampling:
    its = sampling.get("iterations", {}).get("durations_ns", [])
    # sd.cpp prints s/it, or it/s when an iteration takes less than a second (an idle machine)
    bar = [float(v) if unit == "s/it" else 1.0 / float(v)
           for v, unit in re.findall(r"\| \d+/\d+ - ([0-9.]+)(s/it|it/s)", out)]
    if len(its) != len(bar):
        fail(f"sampling: {len(its)} iterations, the bar showed {len(bar)} steps")
    for i, (g, w) in enumerate(zip(its, bar)):
        if abs(g / 1e9 - w) > 0.006:
            fail(f"iteration {i + 1}: {g / 1e9:.3f} s, the bar said {w:.2f} s")
# Builds that load every model at start-up print "loading tensors completed" before
# "generate_image": it ends the "load model" step (its counter reported_seconds). Later ones
# are lazy loads (a model first used by a phase, a LoRA file), each a "load tensors" step
# nested in the phase or LoRA application that needed it.
gen_at = out.find("generate_image ")
startup = [float(x) for x in re.findall(r"loading tensors completed, taking ([0-9.]+)s", out[:max(gen_at, 0)])]
taking = [float(x) for x in re.findall(r"loading tensors completed, taking ([0-9.]+)s", out[max(gen_at, 0):])]
if startup:
    model = one("load model")
    if model:
        got = model.get("counters", {}).get("reported_seconds")
        if got != startup[-1]:
            fail(f"load model: reported_seconds {got}, the library printed {startup[-1]}")
        if model["duration_ns"] / 1e9 < startup[-1] - 0.05:
            fail(f"load model: {model['duration_ns'] / 1e9:.3f} s, shorter than the tensor load it holds "
                 f"({startup[-1]} s)")
        print(f"  load model (at start-up)                     genscope {model['duration_ns'] / 1e9:8.3f} s   "
              f"program's tensor load {startup[-1]:8.3f} s")
loads = by_name.get("load tensors", [])
if len(loads) != len(taking):
    fail(f"{len(loads)} 'load tensors' steps, the library printed {len(taking)} tensor loads after generate_image")
phases = {"get_learned_condition", "sampling", "decode_first_stage"}
for s in loads:
    chain = []
    p = s
    while p["parent_id"] >= 0:
        p = steps[p["parent_id"]]
        chain.append((p["name"], p["kind"]))
    if not any(n in phases or k == "lora_application" for n, k in chain):
        fail(f"a lazy tensor load at +{s['start_offset_ns'] / 1e9:.3f} s is not inside a phase or LoRA "
             f"application ({[n for n, _ in chain]})")
for s, w in zip(sorted(loads, key=lambda s: s["start_offset_ns"] + s["duration_ns"]), taking):
    close(s["duration_ns"] / 1e9, w, f"load tensors (in {parent_name(run, s)})")
applied = re.findall(r"\((\d+) / (\d+)\) LoRA tensors have been applied", out)
loras = [s for s in steps if s["kind"] == "lora_application" and s["name"].startswith("apply lora ")]
if len(loras) != len(applied):
    fail(f"{len(loras)} LoRA applications, sd-cli printed {len(applied)}")
for s, (a, t) in zip(sorted(loras, key=lambda s: s["start_offset_ns"]), applied):
    c = s.get("counters", {})
    if (c.get("lora_tensors_applied"), c.get("lora_tensors_total")) != (float(a), float(t)):
        fail(f"{s['name']}: counters {c}, sd-cli said ({a} / {t})")
    # applied when a phase first uses its model, or all at once before the generation
    # (apply_loras, which builds that print its time hold them in an "apply loras" step)
    if parent_name(run, s) not in phases | {"apply loras"}:
        fail(f"{s['name']} is inside {parent_name(run, s)!r}, not a phase or 'apply loras'")
    print(f"  {s['name']} in {parent_name(run, s)}: {a} / {t} tensors applied")
if "save result image" in out and not any(s["kind"] == "save" for s in steps):
    fail("no save step")
top = sorted((s for s in steps if s["parent_id"] < 0), key=lambda s: s["start_offset_ns"])
for a, b in zip(top, top[1:]):
    # a phase placed by its printed duration ("%.2fs") may start up to 10 ms early
    if a["start_offset_ns"] + a["duration_ns"] > b["start_offset_ns"] + 10_000_000:
        fail(f"top-level steps '{a['name']}' and '{b['name']}' overlap")
done()
