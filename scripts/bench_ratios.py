#!/usr/bin/env python3
"""Prints the ratios of docs/performance.md from Google Benchmark JSON files.

Each ratio divides a genscope figure by its peer or physical limit measured in the same run
(same binary, same process), so machine noise largely cancels.
"""
import json
import pathlib
import sys


def load(folder):
    results = {}
    for f in pathlib.Path(folder).glob("*.json"):
        try:
            data = json.loads(f.read_text())
        except json.JSONDecodeError:
            continue
        for b in data.get("benchmarks", []):
            if b.get("run_type") == "aggregate":
                # --benchmark_repetitions: keep the median under the benchmark's own name.
                if b.get("aggregate_name") == "median":
                    results[b["run_name"].split("/")[0]] = b
                continue
            results.setdefault(b["name"].split("/")[0], b)
    return results


def main():
    r = load(sys.argv[1] if len(sys.argv) > 1 else "build/bench-results")
    rows = []

    def cpu(name):
        return r[name]["cpu_time"] if name in r else None

    if cpu("BM_MarkIteration") and cpu("BM_SteadyClockNow"):
        rows.append(("iteration mark / steady_clock::now()",
                     f"{cpu('BM_MarkIteration'):.1f} ns / {cpu('BM_SteadyClockNow'):.1f} ns",
                     f"{cpu('BM_MarkIteration') / cpu('BM_SteadyClockNow'):.2f}", "<= 2"))
    if cpu("BM_StepEnterExit"):
        rows.append(("step enter+exit, process+system probes (CPU time)",
                     f"{cpu('BM_StepEnterExit') / 1000:.2f} us", "", "<= 10 us"))
    if cpu("BM_NestedStepEnterExit"):
        rows.append(("nested step enter+exit (extra VmHWM fold)",
                     f"{cpu('BM_NestedStepEnterExit') / 1000:.2f} us", "", ""))
    s = r.get("BM_SamplerCpuAt1ms")
    w = r.get("BM_BareWakeupsAt1ms")
    if s:
        own = s["sampler_cpu_percent_of_core"] - (w["wakeup_cpu_percent_of_core"] if w else 0)
        rows.append(("sampler at 1 ms: CPU / wall (one core)",
                     f"{s['sampler_cpu_percent_of_core']:.2f} %"
                     + (f" (bare 1 ms wake-ups alone: {w['wakeup_cpu_percent_of_core']:.2f} %)" if w else ""),
                     f"sampler work beyond wake-ups: {own:.2f} %", "<= 0.5 %"))
    t = r.get("BM_SamplerCostAt10ms")
    if t:
        rows.append(("sampler at 10 ms: CPU per sample, process+system probes (process / system / none)",
                     f"{t['sampler_default_us']:.1f} us ({t['sampler_process_us']:.1f} / "
                     f"{t['sampler_system_us']:.1f} / {t['sampler_no_probe_us']:.1f} us)",
                     f"{t['sampler_default_us'] / t['bare_wakeup_us']:.2f} x a bare 10 ms wake-up "
                     f"({t['bare_wakeup_us']:.1f} us)", "measure"))
    c = r.get("BM_CpuLoopSlowdownWithSampler")
    if c:
        rows.append(("CPU-bound loop, sampler 1 ms on vs off (median of 9)",
                     f"{c['median_on_ms']:.1f} ms vs {c['median_off_ms']:.1f} ms",
                     f"{c['slowdown_percent']:+.2f} %", "<= 1 %"))
    p = r.get("BM_PeakFidelitySpike")
    if p:
        rows.append((f"{p['spike_MiB']:.0f} MiB spike lasting {p['spike_duration_ms']:.1f} ms: peak rise seen",
                     f"exact {p['exact_peak_rise_MiB']:.2f} MiB, sampler-only at 10 ms {p['sampled_10ms_peak_rise_MiB']:.2f} MiB",
                     f"{p['exact_peak_rise_MiB'] / p['spike_MiB']:.3f} of the spike", "exact"))
    read = cpu("BM_ReadRunDocument")
    for name, label in (("BM_RenderHtml", "HTML report"), ("BM_RenderChromeTrace", "Chrome trace"),
                        ("BM_RenderCsv", "CSV (steps + series)")):
        if read and cpu(name):
            rows.append((f"{label} of 10 steps / 100k samples (render)",
                         f"{cpu(name):.1f} ms, {r[name]['output_bytes'] / 1e6:.2f} MB",
                         f"{cpu(name) / read:.3f} x reading the run document ({read:.1f} ms)", ""))
    def ns_per_item(name):
        b = r.get(name)
        return 1e9 / b["items_per_second"] if b and b.get("items_per_second") else None

    bare = ns_per_item("BM_BareMemchrSplit")
    for name, what in [("BM_LineSplitter", "LineSplitter alone ('\\n' and '\\r', bounded)"),
                       ("BM_SessionUnknownLines", "WatchSession, unknown line (all recognisers)"),
                       ("BM_SessionUnknownLinesWithRules", "WatchSession, unknown line + a rule file"),
                       ("BM_SessionTqdmFrames", "WatchSession, tqdm frame (one iteration)"),
                       ("BM_SessionComfyLoads", "WatchSession, ComfyUI load line (a step per 2 lines)")]:
        ns = ns_per_item(name)
        if ns and bare:
            rows.append((what + " / bare memchr line split", f"{ns:.1f} ns / {bare:.1f} ns per line",
                         f"{ns / bare:.1f}", ""))
    print("| figure | measured | ratio | goal |")
    print("|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
