#!/usr/bin/python3
"""comfyui_drive.py URL WORKFLOW.json RECORD.json [LORA_NAME]: queues three prompts on a running
ComfyUI, one after the other (each waits for its /history entry):
  1. WORKFLOW as given (the first loads everything),
  2. the same graph with a new seed (nothing is reloaded; KSampler onwards runs again),
  3. with a LoraLoader between the checkpoint and the rest (LORA_NAME, default
     peer_lora.safetensors): text encoding, sampling and decoding run again with the LoRA.
Then writes RECORD.json, ComfyUI's own record: per prompt its /history status (with the
execution_start/cached/success timestamps, ms), and /internal/logs/raw (its log lines with
their times). Standard library only; exit 1 when a prompt fails."""
import copy
import json
import sys
import time
import urllib.request
import uuid


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req))


def run(url, prompt, timeout=900):
    pid = post(url + "/prompt", {"prompt": prompt, "client_id": str(uuid.uuid4())})["prompt_id"]
    end = time.time() + timeout
    while time.time() < end:
        hist = json.load(urllib.request.urlopen(f"{url}/history/{pid}"))
        if pid in hist:
            return pid, hist[pid]
        time.sleep(0.2)
    raise SystemExit(f"prompt {pid} not finished after {timeout} s")


def main(url, workflow, record, lora="peer_lora.safetensors"):
    base = json.load(open(workflow))
    reseeded = copy.deepcopy(base)
    reseeded["5"]["inputs"]["seed"] = 2
    with_lora = copy.deepcopy(base)
    with_lora["8"] = {"class_type": "LoraLoader",
                      "inputs": {"lora_name": lora, "strength_model": 1.0, "strength_clip": 1.0,
                                 "model": ["1", 0], "clip": ["1", 1]}}
    with_lora["5"]["inputs"]["model"] = ["8", 0]
    with_lora["5"]["inputs"]["seed"] = 3
    for node in ("2", "3"):
        with_lora[node]["inputs"]["clip"] = ["8", 1]
    out = {"prompts": []}
    ok = True
    for name, prompt in (("first", base), ("new seed", reseeded), ("lora", with_lora)):
        pid, entry = run(url, prompt)
        status = entry.get("status", {})
        ok = ok and status.get("status_str") == "success"
        out["prompts"].append({"name": name, "prompt_id": pid, "status": status})
        print(f"comfyui_drive: {name}: {status.get('status_str')}", file=sys.stderr)
    out["logs"] = json.load(urllib.request.urlopen(url + "/internal/logs/raw"))
    with open(record, "w") as f:
        json.dump(out, f, indent=1)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main(*sys.argv[1:])
