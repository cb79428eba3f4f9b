#!/usr/bin/python3
"""compare_comfyui.py RUNS_DIR RECORD.json: genscope's runs of a ComfyUI server (one per prompt,
read by `genscope watch` from its log) against ComfyUI's own record (RECORD.json from
comfyui_drive.py: /history status timestamps and /internal/logs/raw, its log lines with their
times). Each prompt's duration within 2 % or 50 ms of execution_start..execution_success; each
step against the log lines that bound it, read as a person reading the log would:
  load checkpoint        "model weight dtype" .. "CLIP/text encoder model load device"
  move X to device       "Requested to load X" .. the next "loaded completely/partially"
  text encoding          the end of the text encoder's load or move .. the next
                         "Requested to load" of a diffusion model
  sampling               the line before the bar (the UNet's move, else "got prompt") .. the
                         bar's first 100% frame
  vae decode and save    the end of the last step .. "Prompt executed"
and nesting (the CLIP's move inside the checkpoint load)."""
import datetime
import json
import os
import sys

from check_steps import check_tree, close, done, fail, load, parent_name

runs_dir, record = sys.argv[1], load(sys.argv[2])
entries = [(datetime.datetime.fromisoformat(e["t"]).timestamp(), e["m"]) for e in record["logs"]["entries"]]
files = sorted((f for f in os.listdir(runs_dir) if f.startswith("run") and f.endswith(".json")),
               key=lambda f: 0 if f == "run.json" else int(f[4:-5]))
runs = [load(os.path.join(runs_dir, f)) for f in files]
if len(runs) != len(record["prompts"]):
    fail(f"{len(runs)} runs for {len(record['prompts'])} prompts")


def ts_of(status, kind):
    return next(m[1]["timestamp"] / 1000 for m in status["messages"] if m[0] == kind)


starts = [i for i, (_, m) in enumerate(entries) if m.startswith("got prompt")]
for n, (run, prompt) in enumerate(zip(runs, record["prompts"])):
    print(f"prompt {n + 1} ({prompt['name']}):")
    check_tree(run, f"prompt {n + 1}")
    st = prompt["status"]
    close(run["duration_ns"] / 1e9, ts_of(st, "execution_success") - ts_of(st, "execution_start"), "prompt (/history)")
    lines = entries[starts[n]:starts[n + 1] if n + 1 < len(starts) else len(entries)]
    expected = []  # (name, start, end, parent)
    last_end = lines[0][0]
    encoder_ready = False
    ckpt = None
    for i, (t, m) in enumerate(lines):
        if m.startswith("model weight dtype"):
            ckpt = [t, None]
        elif m.startswith("CLIP/text encoder model load device") and ckpt:
            expected.append(("load checkpoint", ckpt[0], t, None))
            last_end, encoder_ready, ckpt = t, True, None
        elif m.startswith("Requested to load "):
            model = m[len("Requested to load "):].strip()
            done_t = next(t2 for t2, m2 in lines[i + 1:] if m2.startswith("loaded "))
            if "Clip" not in model and "VAE" not in model and "Autoencoder" not in model and encoder_ready:
                expected.append(("text encoding", last_end, t, None))
                encoder_ready = False
            expected.append((f"move {model} to device", t, done_t, "load checkpoint" if ckpt else None))
            last_end = max(last_end, done_t)
            if "Clip" in model:
                encoder_ready = True
        elif "100%|" in m and not any(e[0] == "sampling" for e in expected):
            expected.append(("sampling", last_end, t, None))
            last_end = t
        elif m.startswith("Prompt executed"):
            expected.append(("vae decode and save", last_end, t, None))
    got = {s["name"]: s for s in run["steps"]}
    for name, a, b, parent in expected:
        s = got.get(name)
        if s is None:
            fail(f"prompt {n + 1}: no step '{name}'")
            continue
        close(s["duration_ns"] / 1e9, b - a, name)
        if parent_name(run, s) != parent:
            fail(f"prompt {n + 1}: '{name}' is inside {parent_name(run, s)!r}, expected {parent!r}")
    for s in run["steps"]:
        if s["name"] not in {e[0] for e in expected}:
            fail(f"prompt {n + 1}: unexpected step '{s['name']}'")
    inferred = [s["name"] for s in run["steps"] if s.get("inferred")]
    print(f"  inferred: {inferred}")
done()
