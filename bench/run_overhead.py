#!/usr/bin/env python3
"""`genscope run`'s cost next to the program alone, as ratios measured in the same run.

1. A CPU-bound child (genscope_test_child work ROUNDS, which times its own fixed work) alone
   and under `genscope run`, in interleaved pairs (the order alternates): the slowdown of the
   child's own work time, median of the per-pair ratios; and of the whole command's wall time.
2. Output pass-through: the same bytes through `genscope run -- cat FILE` and through the
   peer `cat FILE | cat` (one pipe and one copying process each), read by this script until
   the end of the stream: the time a reader of the output waits. A throughput ratio (peer time
   / genscope time; >= 0.8 is the goal), median of interleaved pairs, for random binary bytes
   and for text lines, with the built-in recognisers and with --recognizers none. genscope
   reads steps from the output on its own thread: output it cannot match in time is passed on
   but not analysed (it says how many bytes); the script prints that count too.

    bench/run_overhead.py BUILD_DIR [--pairs N] [--mib N] [--rounds N]
Prints a table and the machine's load average (the machine is shared: read ratios, not times).
"""
import argparse
import os
import resource
import random
import statistics
import subprocess
import sys
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("build")
ap.add_argument("--pairs", type=int, default=11)
ap.add_argument("--mib", type=int, default=256)
ap.add_argument("--rounds", type=int, default=3000)
args = ap.parse_args()
genscope = os.path.join(args.build, "tools/genscope/genscope")
child = os.path.join(args.build, "tests/genscope_test_child")
for path in (genscope, child):
    if not os.access(path, os.X_OK):
        sys.exit(f"missing {path}: build genscope_cli and genscope_test_child first")
run = [genscope, "run", "--quiet", "--report", os.devnull, "--"]


def children_cpu():
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def timed(cmd, shell=False):
    """Wall seconds, stdout, and the CPU seconds of the command and everything it waited for."""
    cpu = children_cpu()
    start = time.perf_counter()
    out = subprocess.run(cmd, shell=shell, check=True, stdout=subprocess.PIPE if not shell else None)
    return time.perf_counter() - start, out.stdout if not shell else None, children_cpu() - cpu


def work_pair(first_alone):
    results = {}
    for mode in (["alone", "run"] if first_alone else ["run", "alone"]):
        cmd = ([child] if mode == "alone" else run + [child]) + ["work", str(args.rounds)]
        wall, out, cpu = timed(cmd)
        fields = out.split()
        work, child_cpu = int(fields[1]), float(fields[3]) / 1e9
        results[mode] = (work, wall, cpu - child_cpu, child_cpu)
    return results


def median_ratio(pairs, key):
    return statistics.median(p["run"][key] / p["alone"][key] for p in pairs)


print(f"load average before: {os.getloadavg()}", flush=True)
pairs = [work_pair(i % 2 == 0) for i in range(args.pairs)]
work_slowdown = median_ratio(pairs, 0) - 1
wall_slowdown = median_ratio(pairs, 1) - 1
alone_work = statistics.median(p["alone"][0] for p in pairs) / 1e9
print(f"CPU-bound child ({alone_work:.2f} s of work alone), {args.pairs} interleaved pairs:")
print(f"  work time slowdown under genscope run: {work_slowdown * 100:+.2f} % (median of pair ratios)")
print(f"  whole command wall slowdown:           {wall_slowdown * 100:+.2f} %")
genscope_cpu = statistics.median(p["run"][2] / p["run"][3] for p in pairs)
print(f"  genscope's own CPU time / the child's:  {genscope_cpu * 100:.2f} % (median; the cost "
      f"when no core is free)")

with tempfile.TemporaryDirectory() as tmp:
    binary = os.path.join(tmp, "random.bin")
    text = os.path.join(tmp, "lines.txt")
    rng = random.Random(7)
    with open(binary, "wb") as f:
        block = rng.randbytes(1 << 20)
        for i in range(args.mib):
            f.write(block[i:] + block[:i])
    with open(text, "w") as f:
        line = "step {:6d}: loss 0.{:06d} |" + "#" * 40 + "| 3.85it/s\n"
        size = 0
        i = 0
        while size < args.mib << 20:
            s = line.format(i, (i * 7919) % 1000000)
            f.write(s)
            size += len(s)
            i += 1
    def reader_time(cmd):
        """Seconds until the end of cmd's stdout (read in 1 MiB blocks), its stderr, and the
        CPU seconds of cmd and all it waited for."""
        cpu = children_cpu()
        start = time.perf_counter()
        p = subprocess.Popen(cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        while p.stdout.read(1 << 20):
            pass
        elapsed = time.perf_counter() - start
        err = p.stderr.read().decode(errors="replace")
        p.wait()
        return elapsed, err, children_cpu() - cpu

    for name, path in (("random binary", binary), ("text lines", text)):
        subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)  # page cache
        for variant, extra in (("recognisers on", []), ("--recognizers none", ["--recognizers", "none"])):
            ratios, mbps, unread, cpu_ratios = [], [], [], []
            for i in range(args.pairs):
                order = ["peer", "genscope"] if i % 2 == 0 else ["genscope", "peer"]
                t, c = {}, {}
                for mode in order:
                    if mode == "peer":
                        t[mode], _, c[mode] = reader_time(f"cat {path} | cat")
                    else:
                        cmd = " ".join([genscope, "run", "--quiet", "--report", os.devnull] + extra +
                                       ["--", "cat", path])
                        t[mode], err, c[mode] = reader_time(cmd)
                        words = err.split(" bytes of CMD's output")
                        unread.append(int(words[0].split()[-1]) if len(words) > 1 else 0)
                ratios.append(t["peer"] / t["genscope"])
                cpu_ratios.append(c["genscope"] / c["peer"])
                mbps.append(args.mib / t["genscope"])
            print(f"pass-through, {args.mib} MiB of {name}, {variant}: throughput "
                  f"{statistics.median(ratios):.2f}x the peer (median of {args.pairs} pairs; "
                  f"{statistics.median(mbps):.0f} MiB/s through genscope; not analysed: median "
                  f"{statistics.median(unread) / (1 << 20):.0f} MiB; CPU time "
                  f"{statistics.median(cpu_ratios):.2f}x the peer's)", flush=True)
print(f"load average after: {os.getloadavg()}")
