#!/usr/bin/python3
"""What the genscope node package costs ComfyUI (docs/performance.md, "ComfyUI node package").

    bench/comfyui_nodes.py [--prompts N] [BUILD_DIR]      (needs GENSCOPE_COMFYUI_DIR; ~6 min)

On the real ComfyUI v0.3.18 (a private copy, as tests/peers/comfyui_nodes.sh makes) it runs N
prompts that each re-run the sampler, decode and save (a new seed each time, 64x64, 4 steps),
first with the package and the cost probe (bench/comfyui_cost_probe: time spent in the
package on ComfyUI's prompt thread, per prompt and per node), then without the package (the
peer: the same prompts, same server settings). Prompt time = ComfyUI's own execution_start ->
execution_success timestamps in /history; server CPU = utime+stime of the server process over
the prompts. Prints one table.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "peers"))
import comfyui_nodes as e2e  # noqa: E402


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def prompt_ms(history):
    stamps = {m[0]: m[1].get("timestamp") for m in history["status"]["messages"]}
    return stamps["execution_success"] - stamps["execution_start"]


def series(server, n, seed0):
    times, nodes = [], 0
    cpu0 = cpu_seconds(server.proc.pid)
    for i in range(n):
        pid = server.post_prompt(e2e.with_seed(seed0 + i))
        h = server.wait_history(pid)
        times.append(prompt_ms(h))
        nodes += 3  # KSampler, VAEDecode, SaveImage re-run; the other 5 are cached
    return times, cpu_seconds(server.proc.pid) - cpu0, nodes


def main():
    p = argparse.ArgumentParser()
    p.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    p.add_argument("--prompts", type=int, default=5)
    p.add_argument("--port", type=int, default=8197)
    p.add_argument("--only-with", action="store_true",
                   help="skip the server without the package (the package's own cost only)")
    args = p.parse_args()
    # The ComfyUI of GENSCOPE_COMFYUI_DIR and the Python that runs it (tests/peers/comfyui_env.sh:
    # GENSCOPE_COMFYUI_PYTHON, else a venv prepared once from PyPI); this script runs under it.
    found = subprocess.run(["bash", "-c", 'source "$1" && comfyui_env >&2 && '
                            'printf "%s\\n%s\\n" "$COMFYUI" "$COMFYUI_PY"', "bench",
                            os.path.join(ROOT, "tests", "peers", "comfyui_env.sh")],
                           capture_output=True, text=True)
    if found.returncode != 0:
        print((found.stdout + found.stderr).strip())
        return found.returncode
    comfyui, comfy_py = found.stdout.split("\n")[:2]
    if os.environ.get("GENSCOPE_BENCH_IN_COMFYUI_PYTHON") != "1":
        os.environ["GENSCOPE_BENCH_IN_COMFYUI_PYTHON"] = "1"
        os.execv(comfy_py, [comfy_py, os.path.abspath(__file__), *sys.argv[1:]])
    cache = os.environ.get("GENSCOPE_PEERS_CACHE",
                           os.path.join(os.path.expanduser("~"), ".cache", "genscope-peers"))
    checkpoint = os.path.join(cache, "sd15-random.safetensors")
    subprocess.run(["flock", os.path.join(cache, "sd15-random.lock"), sys.executable,
                    os.path.join(ROOT, "tests", "peers", "make_sd15_checkpoint.py"), checkpoint],
                   check=True)
    env_lines = {"COMFYUI": comfyui, "CHECKPOINT": checkpoint, "PYTHONPATH": ""}
    work = tempfile.mkdtemp(prefix="genscope-comfyui-bench.")
    try:
        app = os.path.join(work, "ComfyUI")
        subprocess.run(f"mkdir -p {app} && tar -C {env_lines['COMFYUI']} --exclude=./models "
                       f"--exclude=./output --exclude=./temp --exclude=./user "
                       f"--exclude='./custom_nodes/genscope*' -cf - . | tar -C {app} -xf -",
                       shell=True, check=True)
        for d in os.listdir(os.path.join(env_lines["COMFYUI"], "models")):
            os.makedirs(os.path.join(app, "models", d), exist_ok=True)
        os.symlink(env_lines["CHECKPOINT"],
                   os.path.join(app, "models", "checkpoints", "sd15-random.safetensors"))
        subprocess.run([sys.executable, os.path.join(ROOT, "tests", "peers",
                                                     "make_tiny_sd15_lora.py"),
                        os.path.join(app, "models", "loras", "genscope-tiny.safetensors")],
                       check=True)
        package = os.path.join(app, "custom_nodes", "genscope_comfyui")
        probe = os.path.join(app, "custom_nodes", "genscope_cost_probe")
        os.symlink(os.path.join(ROOT, "integrations", "comfyui"), package)
        os.symlink(os.path.join(ROOT, "bench", "comfyui_cost_probe"), probe)
        with_env = dict(os.environ, PYTHONPATH=os.path.join(args.build, "python"),
                        GENSCOPE_COMFYUI_RUNS_DIR=os.path.join(work, "runs"))
        server = e2e.Server(app, with_env, args.port, os.path.join(work, "with.log"))
        try:
            server.wait_history(server.post_prompt(e2e.with_seed(999)))  # load models, warm up
            before = server.get_json("/genscope-bench/cost")
            with_ms, with_cpu, nodes = series(server, args.prompts, 1000)
            after = server.get_json("/genscope-bench/cost")
            cost = {k: after[k] - before[k] for k in ("wall_s", "cpu_s", "calls")}
            parts = {k: [v[i] - before["parts"].get(k, [0, 0, 0])[i] for i in range(3)]
                     for k, v in after["parts"].items()}
        finally:
            server.stop()
        os.unlink(package)
        os.unlink(probe)
        if args.only_with:
            plain_ms, plain_cpu = with_ms, with_cpu
            raise StopIteration
        plain_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        server = e2e.Server(app, plain_env, args.port, os.path.join(work, "without.log"))
        try:
            server.wait_history(server.post_prompt(e2e.with_seed(999)))
            plain_ms, plain_cpu, _ = series(server, args.prompts, 1000)
        finally:
            server.stop()
    except StopIteration:
        pass
    finally:
        shutil.rmtree(work, ignore_errors=True)
    runs = args.prompts
    per_prompt_ms = cost["wall_s"] * 1000 / runs
    per_prompt_cpu_ms = cost["cpu_s"] * 1000 / runs
    mean_with, mean_plain = statistics.mean(with_ms), statistics.mean(plain_ms)
    print(f"prompts: {args.prompts} measured (+1 warm-up) each way, 64x64, 4 steps, "
          f"3 nodes re-run + 5 cached per prompt")
    print(f"package on ComfyUI's prompt thread: {per_prompt_ms:.2f} ms wall, "
          f"{per_prompt_cpu_ms:.2f} ms CPU per prompt ({cost['calls'] / runs:.0f} calls); "
          f"{per_prompt_ms / mean_with * 100:.3f} % of a prompt; "
          f"{per_prompt_ms / 8:.3f} ms per node (8 nodes: 3 run, 5 cached)")
    for what, (wall, cpu, calls) in sorted(parts.items(), key=lambda kv: -kv[1][0]):
        if calls:
            print(f"  {what:34s} {calls / runs:5.1f} calls/prompt  wall {wall * 1e3 / calls:7.3f} ms"
                  f"  CPU {cpu * 1e3 / calls:7.3f} ms per call")
    if args.only_with:
        return 0
    print(f"prompt time (ComfyUI's timestamps): with {mean_with:.0f} ms "
          f"(min {min(with_ms)}, max {max(with_ms)}), without {mean_plain:.0f} ms "
          f"(min {min(plain_ms)}, max {max(plain_ms)}): ratio {mean_with / mean_plain:.4f}")
    print(f"server CPU over the measured prompts: with {with_cpu:.2f} s, without "
          f"{plain_cpu:.2f} s: ratio {with_cpu / plain_cpu:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
