#!/usr/bin/env python3
"""genscope's own CPU while it watches a program (`genscope run`), adaptive cadence against the
fixed 10 ms cadence of earlier versions, measured in the same run.

For each case the script starts `genscope run --quiet --report /dev/null [OPTS] -- bash -c
'PROGRAM; times > F'`, waits for genscope with os.wait4 (its CPU plus that of everything it
waited for: the program), and subtracts the program's own CPU, which bash's `times` writes
when the program ends (the shell's and its children's user and system time). What remains is
genscope's: start-up, the process-tree sampler, the output reader, the report at the end.

Programs: `sleep S` (a program that does nothing) and a CPU-bound loop of S seconds
(genscope_test_child spin MS). Cadences: adaptive (the default: 10 ms near events, up to
500 ms between) and fixed (--max-interval 10). Goal (issue 21): genscope <= 0.3 % of a core.

    bench/watch_cost.py BUILD_DIR [--seconds S] [--repeat N]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

ap = argparse.ArgumentParser()
ap.add_argument("build")
ap.add_argument("--seconds", type=float, default=30.0)
ap.add_argument("--repeat", type=int, default=1)
args = ap.parse_args()
genscope = os.path.join(args.build, "tools/genscope/genscope")
child = os.path.join(args.build, "tests/genscope_test_child")
for path in (genscope, child):
    if not os.access(path, os.X_OK):
        sys.exit(f"missing {path}: build genscope_cli and genscope_test_child first")


def parse_times(text):
    """bash `times`: two lines 'XmY.YYYs XmY.YYYs' (shell, then children); total seconds."""
    total = 0.0
    for line in text.strip().splitlines():
        for field in line.split():
            m, s = field.rstrip("s").split("m")
            total += int(m) * 60 + float(s)
    return total


def measure(program, cadence):
    with tempfile.NamedTemporaryFile("r", suffix=".times") as f:
        opts = ["--max-interval", "10"] if cadence == "fixed 10 ms" else []
        cmd = [genscope, "run", "--quiet", "--report", os.devnull, *opts, "--",
               "bash", "-c", f"{program}; times > {f.name}"]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, ru = os.wait4(proc.pid, 0)
        if status != 0:
            sys.exit(f"{cmd} failed: wait status {status}")
        total = ru.ru_utime + ru.ru_stime
        program_cpu = parse_times(f.read())
    return total - program_cpu, program_cpu


S = args.seconds
child_spin = f"{child} spin {int(S * 1000)}"
programs = [(f"sleep {S:g}", f"sleep {S:g}"), (f"CPU-bound {S:g} s", child_spin)]
cadences = ["adaptive", "fixed 10 ms"]
print(f"load average before: {os.getloadavg()[0]:.2f}")
print(f"{'program':<18} {'cadence':<12} {'genscope CPU':>13} {'% of a core':>12} {'program CPU':>12}")
for label, program in programs:
    for cadence in cadences:
        own, prog = [], []
        for _ in range(args.repeat):
            o, p = measure(program, cadence)
            own.append(o)
            prog.append(p)
        o = statistics.median(own)
        print(f"{label:<18} {cadence:<12} {o * 1e3:>10.1f} ms {100 * o / S:>11.3f} % "
              f"{statistics.median(prog):>10.2f} s")
print(f"load average after: {os.getloadavg()[0]:.2f}")
