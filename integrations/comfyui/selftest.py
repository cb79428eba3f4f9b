#!/usr/bin/env python3
"""`genscope comfyui selftest COMFYUI_DIR` (docs/comfyui.md, "Selftest"): checks this package
against the user's own ComfyUI. Starts that ComfyUI with the package on loopback with --cpu in
a scratch base folder (its own models, custom nodes, output, user folder; the ComfyUI folder
is not written to), queues prompts — fresh, cached, a failing node, an interrupt, an async
node (where the ComfyUI runs async nodes), one without a client id, and with --checkpoint a
checkpoint → text encode → sampler → decode workflow — and compares every run genscope
recorded with ComfyUI's own messages (noted when ComfyUI sent them, by the selftest's own
custom node, selftest_nodes.py). One verdict line per check; exit 1 on any failure, 2 when
ComfyUI could not be started.

Run with the Python that runs ComfyUI (it must import genscope). Standard library only.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
TOLERANCE_RATIO, TOLERANCE_S = 0.02, 0.020


class Selftest:
    def __init__(self, url, record=None):
        self.url, self.failures, self.checks = url, 0, 0
        self.record = record

    def verdict(self, ok, name, detail):
        self.checks += 1
        self.failures += 0 if ok else 1
        print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}", flush=True)

    def get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=30) as r:
            return json.load(r)

    def post(self, path, body):
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read()
        return json.loads(text) if text.strip() else None

    def queue(self, prompt, client=True):
        body = {"prompt": prompt}
        if client:
            body["client_id"] = "genscope-selftest"
        return self.post("/prompt", body)["prompt_id"]

    def wait(self, prompt_id, timeout=900):
        end = time.time() + timeout
        while time.time() < end:
            history = self.get(f"/history/{prompt_id}")
            if prompt_id in history:
                break
            time.sleep(0.1)
        else:
            raise RuntimeError(f"prompt {prompt_id} did not finish in {timeout} s")
        while time.time() < end:  # the package writes the document on its writer thread
            try:
                return self.get(f"/genscope/runs/{prompt_id}")
            except urllib.error.HTTPError:
                time.sleep(0.1)
        raise RuntimeError(f"no genscope run for prompt {prompt_id}")

    def messages(self, prompt_id):
        return [m for m in self.get("/genscope-selftest/messages")
                if isinstance(m[2], dict) and m[2].get("prompt_id") == prompt_id]

    # -- comparisons ------------------------------------------------------------------------

    def comfy_node_times(self, messages):
        """{node: seconds} between ComfyUI's `executing` for a node and its next execution
        message; node ids in the order ComfyUI started them."""
        times, order, open_node, since = {}, [], None, None
        for t, event, data in messages:
            if event not in ("executing", "execution_success", "execution_error",
                             "execution_interrupted"):
                continue
            if open_node is not None:
                times[open_node] = times.get(open_node, 0.0) + t - since
                open_node = None
            if event == "executing" and data.get("node") is not None:
                open_node, since = str(data["node"]), t
                if open_node not in order:
                    order.append(open_node)
        return times, order

    def comfy_state_times(self, messages):
        """{node: seconds} from the first progress_state naming a node running to the first
        naming it finished, or to the execution_error / execution_interrupted naming it
        (ComfyUI's per-node states, where it sends them)."""
        started, finished = {}, {}
        for t, event, data in messages:
            if event in ("execution_error", "execution_interrupted") \
                    and data.get("exception_type") != "ExecutionBlocked":
                node = str(data.get("node_id"))
                if node in started:
                    finished.setdefault(node, t)
            if event != "progress_state":
                continue
            for node, state in (data.get("nodes") or {}).items():
                s = state.get("state") if isinstance(state, dict) else None
                if s == "running":
                    started.setdefault(node, t)
                elif s == "finished":
                    finished.setdefault(node, t)
        return {n: finished[n] - started[n] for n in started if n in finished}

    def check_prompt(self, name, prompt_id, doc, skip_times=()):
        messages = self.messages(prompt_id)
        if self.record is not None:
            self.record.append({"name": name, "prompt_id": prompt_id, "messages": messages,
                                "prompt": next((a["data"] for a in doc.get("attachments", [])
                                                if a["type"] == "comfyui_prompt"), None)})
        labels = doc.get("labels", {})
        steps = [s for s in doc.get("steps", []) if "comfyui.node_id" in s.get("labels", {})]
        ran = [s for s in steps if s["labels"].get("comfyui.cached") != "true"]
        comfy_times, order = self.comfy_node_times(messages)
        # Where ComfyUI sends per-node states (progress_state: running -> finished), they are
        # its own record of each node's start and finish; else the executing messages are.
        state_times = self.comfy_state_times(messages)
        source = "executing messages"
        if state_times:
            comfy_times, source = state_times, "progress_state messages"
        cached = next((d.get("nodes") or [] for _, e, d in messages if e == "execution_cached"), [])
        self.verdict(labels.get("comfyui.nodes_executed") == str(len(order))
                     and labels.get("comfyui.nodes_cached") == str(len(cached)),
                     f"{name} counts", f"genscope {labels.get('comfyui.nodes_executed')} run, "
                     f"{labels.get('comfyui.nodes_cached')} cached; ComfyUI {len(order)} "
                     f"executing, {len(cached)} cached")
        ours = {}
        for s in ran:
            node = s["labels"]["comfyui.node_id"]
            ours[node] = ours.get(node, 0.0) + s["duration_ns"] / 1e9
        worst, bad = 0.0, []
        for node, theirs in comfy_times.items():
            if node in skip_times:
                continue
            mine = ours.get(node)
            if mine is None:
                bad.append(f"{node}: no step")
                continue
            delta = abs(mine - theirs)
            worst = max(worst, delta)
            if delta > max(TOLERANCE_S, TOLERANCE_RATIO * theirs):
                bad.append(f"{node}: {mine:.3f} s vs {theirs:.3f} s")
        self.verdict(not bad and bool(comfy_times) or not comfy_times and not ran,
                     f"{name} node times",
                     f"{len(comfy_times) - len(set(skip_times) & set(comfy_times))} nodes within "
                     f"2 % or 20 ms of ComfyUI's {source} (largest difference "
                     f"{worst * 1000:.1f} ms)" + (f"; off: {', '.join(bad)}" if bad else ""))
        return steps, messages

    # -- prompts ----------------------------------------------------------------------------


def image_graph(sleep=0.3, seed=0, extra=None):
    prompt = {
        "1": {"class_type": "EmptyImage", "inputs": {"width": 64, "height": 64, "batch_size": 1,
                                                      "color": seed}},
        "2": {"class_type": "GenscopeSelftestSleep", "inputs": {"image": ["1", 0],
                                                                 "seconds": sleep}},
        "3": {"class_type": "ImageInvert", "inputs": {"image": ["2", 0]}},
        "4": {"class_type": "SaveImage", "inputs": {"images": ["3", 0],
                                                     "filename_prefix": "genscope-selftest"}},
    }
    prompt.update(extra or {})
    return prompt


def checkpoint_graph(name):
    return {
        "1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": name}},
        "2": {"class_type": "CLIPTextEncode", "inputs": {"text": "a cat", "clip": ["1", 1]}},
        "3": {"class_type": "CLIPTextEncode", "inputs": {"text": "", "clip": ["1", 1]}},
        "4": {"class_type": "EmptyLatentImage", "inputs": {"width": 64, "height": 64,
                                                            "batch_size": 1}},
        "5": {"class_type": "KSampler", "inputs": {
            "seed": 1, "steps": 2, "cfg": 7.0, "sampler_name": "euler", "scheduler": "normal",
            "denoise": 1.0, "model": ["1", 0], "positive": ["2", 0], "negative": ["3", 0],
            "latent_image": ["4", 0]}},
        "6": {"class_type": "VAEDecode", "inputs": {"samples": ["5", 0], "vae": ["1", 2]}},
        "7": {"class_type": "SaveImage", "inputs": {"images": ["6", 0],
                                                     "filename_prefix": "genscope-selftest"}},
    }


def run_checks(t, checkpoint, async_node):
    # fresh
    pid = t.queue(image_graph())
    doc = t.wait(pid)
    t.check_prompt("fresh", pid, doc)
    t.verdict(doc["labels"].get("comfyui.status") == "success", "fresh status",
              doc["labels"].get("comfyui.status"))
    # cached
    pid = t.queue(image_graph())
    doc = t.wait(pid)
    steps, _ = t.check_prompt("cached", pid, doc)
    t.verdict(steps and all(s["status"] == "skipped" for s in steps), "cached steps",
              f"{len(steps)} steps, all skipped as cached" if steps else "no steps")
    # without a client id
    pid = t.queue(image_graph(seed=2), client=False)
    doc = t.wait(pid)
    history = t.get(f"/history/{pid}")[pid]
    status = history.get("status", {})
    cached = next((d.get("nodes") or [] for e, d in status.get("messages", [])
                   if e == "execution_cached"), [])
    ran = [s for s in doc["steps"] if "comfyui.node_id" in s["labels"]
           and s["labels"].get("comfyui.cached") != "true"]
    expected = len(image_graph()) - len(cached)
    t.verdict(len(ran) == expected and doc["labels"].get("comfyui.status") == "success"
              and status.get("status_str") == "success",
              "no client id", f"{len(ran)} nodes run, {expected} by ComfyUI's /history status "
              f"messages ({len(cached)} cached); status {doc['labels'].get('comfyui.status')}, "
              f"ComfyUI {status.get('status_str')}")
    # a failing node
    pid = t.queue(image_graph(seed=3, extra={
        "3": {"class_type": "GenscopeSelftestFail", "inputs": {"image": ["2", 0]}}}))
    doc = t.wait(pid)
    t.check_prompt("failing node", pid, doc)
    failed = [s["labels"]["comfyui.node_id"] for s in doc["steps"] if s["status"] == "failed"]
    t.verdict(doc["labels"].get("comfyui.status") == "error" and failed == ["3"],
              "failing node", f"status {doc['labels'].get('comfyui.status')}, failed steps "
              f"{failed} (node 3 expected)")
    # an interrupt
    pid = t.queue(image_graph(sleep=30, seed=4))
    time.sleep(0.2)
    for _ in range(100):
        if any(e == "executing" and d.get("node") == "2" for _, e, d in t.messages(pid)):
            break
        time.sleep(0.1)
    time.sleep(0.5)
    t.post("/interrupt", {})
    doc = t.wait(pid)
    t.check_prompt("interrupt", pid, doc)
    interrupted = [s["labels"]["comfyui.node_id"] for s in doc["steps"]
                   if s["labels"].get("comfyui.interrupted") == "true"]
    t.verdict(doc["labels"].get("comfyui.status") == "interrupted" and interrupted == ["2"],
              "interrupt", f"status {doc['labels'].get('comfyui.status')}, interrupted steps "
              f"{interrupted} (node 2 expected)")
    # an async node
    if async_node:
        pid = t.queue(image_graph(sleep=0.3, seed=5, extra={
            "5": {"class_type": "GenscopeSelftestAsyncSleep",
                  "inputs": {"image": ["1", 0], "seconds": 1.0}},
            "6": {"class_type": "SaveImage", "inputs": {"images": ["5", 0],
                                                         "filename_prefix": "genscope-async"}}}))
        doc = t.wait(pid)
        steps, messages = t.check_prompt("async", pid, doc, skip_times=("5",))
        mine = [s for s in steps if s["labels"]["comfyui.node_id"] == "5"]
        states = t.comfy_state_times(messages)
        theirs = states.get("5")
        ok = len(mine) == 1 and mine[0]["labels"].get("comfyui.async") == "true"
        detail = f"{len(mine)} step(s) for the async node"
        if mine:
            d = mine[0]["duration_ns"] / 1e9
            ok = ok and d >= 1.0
            detail += f", {d:.3f} s (it awaits 1 s)"
            if theirs is not None:
                ok = ok and abs(d - theirs) <= max(TOLERANCE_S, TOLERANCE_RATIO * theirs)
                detail += f"; ComfyUI's progress_state running -> finished {theirs:.3f} s"
        t.verdict(ok, "async node", detail)
    else:
        print("SKIP async node: this ComfyUI does not run async nodes "
              "(its execution.execute is not a coroutine function)", flush=True)
    # a checkpoint workflow: model loads, sampler steps, the run header
    if checkpoint:
        pid = t.queue(checkpoint_graph(os.path.basename(checkpoint)))
        doc = t.wait(pid)
        steps, _ = t.check_prompt("checkpoint", pid, doc)
        sampler = [s for s in steps if s["labels"]["comfyui.class_type"] == "KSampler"]
        loads = [s for s in doc["steps"] if s["name"] == "load_models_gpu"]
        params = doc["pipeline"].get("parameters", {})
        t.verdict(bool(sampler) and sampler[0].get("iterations", {}).get("count") == 2
                  and len(loads) >= 1 and params.get("steps") == "2"
                  and doc["pipeline"].get("model") == os.path.basename(checkpoint),
                  "checkpoint workflow",
                  f"sampler iterations {sampler[0].get('iterations', {}).get('count') if sampler else None}"
                  f" (2 expected), {len(loads)} model loads, model {doc['pipeline'].get('model')},"
                  f" steps {params.get('steps')}")


def start_comfyui(args, base, port):
    env = dict(os.environ)
    if args.pythonpath:
        env["PYTHONPATH"] = os.pathsep.join([args.pythonpath] + (
            [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("OMP_NUM_THREADS", "1")
    cmd = [args.python or sys.executable, os.path.join(args.comfyui, "main.py"), "--cpu",
           "--listen", "127.0.0.1", "--port", str(port), "--base-directory", base,
           "--user-directory", os.path.join(base, "user"), "--disable-auto-launch"]
    log = open(os.path.join(base, "comfyui.log"), "w")
    process = subprocess.Popen(cmd, cwd=args.comfyui, env=env, stdout=log,
                               stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    end = time.time() + args.start_timeout
    while time.time() < end:
        if process.poll() is not None:
            break
        try:
            urllib.request.urlopen(url + "/system_stats", timeout=5).read()
            return process, url
        except Exception:
            time.sleep(0.5)
    process.kill()
    return None, url


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("comfyui", help="the ComfyUI folder (main.py)")
    parser.add_argument("--python", help="the python3 that runs ComfyUI (default: this one)")
    parser.add_argument("--pythonpath", help="a folder to put first on ComfyUI's PYTHONPATH "
                        "(where the genscope module is, when it is not installed)")
    parser.add_argument("--checkpoint", help="a checkpoint file to also run a checkpoint → "
                        "sampler → decode workflow with (linked into the scratch folder)")
    parser.add_argument("--port", type=int, default=0, help="default: a free one")
    parser.add_argument("--start-timeout", type=float, default=300)
    parser.add_argument("--record", help="write ComfyUI's messages of every prompt (JSON)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = parser.parse_args(argv)
    args.comfyui = os.path.abspath(args.comfyui)
    if not os.path.isfile(os.path.join(args.comfyui, "main.py")):
        print(f"FAIL setup: {args.comfyui} is not a ComfyUI folder (no main.py)")
        return 2
    base = tempfile.mkdtemp(prefix="genscope-selftest.")
    for folder in ("models/checkpoints", "custom_nodes/genscope_selftest_nodes", "input",
                   "output", "temp", "user"):
        os.makedirs(os.path.join(base, folder), exist_ok=True)
    os.symlink(HERE, os.path.join(base, "custom_nodes", "genscope_comfyui"))
    shutil.copy(os.path.join(HERE, "selftest_nodes.py"),
                os.path.join(base, "custom_nodes", "genscope_selftest_nodes", "__init__.py"))
    if args.checkpoint:
        os.symlink(os.path.abspath(args.checkpoint),
                   os.path.join(base, "models", "checkpoints", os.path.basename(args.checkpoint)))
    port = args.port
    if not port:
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    process, url = start_comfyui(args, base, port)
    status = 2
    try:
        if process is None:
            print(f"FAIL setup: ComfyUI did not start on {url} (log: {base}/comfyui.log)")
            args.keep = True
            return 2
        record = [] if args.record else None
        t = Selftest(url, record)
        info = t.get("/object_info")
        version = t.get("/system_stats").get("system", {}).get("comfyui_version", "?")
        print(f"genscope selftest: ComfyUI {version} at {args.comfyui}, scratch {base}",
              flush=True)
        t.verdict("GenscopeSelftestSleep" in info, "setup",
                  "the selftest's nodes are loaded" if "GenscopeSelftestSleep" in info
                  else "the selftest's nodes did not load (see comfyui.log)")
        try:
            run_checks(t, args.checkpoint, "GenscopeSelftestAsyncSleep" in info)
        except Exception as e:
            t.verdict(False, "run", f"{type(e).__name__}: {e}")
        finally:
            if record is not None:
                with open(args.record, "w") as f:
                    json.dump({"comfyui_version": version, "prompts": record}, f, indent=1)
        print(f"genscope selftest: {t.checks - t.failures} of {t.checks} checks passed",
              flush=True)
        status = 0 if t.failures == 0 else 1
        if status:
            args.keep = True
        return status
    finally:
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
        if args.keep:
            print(f"scratch folder kept: {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
