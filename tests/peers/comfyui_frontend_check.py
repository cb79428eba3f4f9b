"""Checks what ComfyUI's page showed (tests/peers/comfyui_frontend/drive.mjs's result.json)
against the package's run documents (RUNS_DIR/<prompt id>.json), for comfyui_frontend.sh.

The figures expected on each node are made here from the run document itself (not from the
package's graph.py): the node's top-level step time, its exact RSS peak, its GPU peak (NVML's
per-process figure, else the allocator's reserved bytes), formatted as web/genscope.js
documents it; the marks are the slowest executed node and the highest peaks.

  comfyui_frontend_check.py RESULT.json RUNS_DIR        exit 0 when every check passed
"""
import json
import os
import sys

from check_steps import FAILED, check as _check


def check(what, ok, why=""):
    return _check(bool(ok), what, why)


def seconds_text(ns):
    s = ns / 1e9
    if s < 0.01:
        return f"{s * 1000:.1f} ms"
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 10:
        return f"{s:.2f} s"
    if s < 600:
        return f"{s:.1f} s"
    return f"{int(s // 60)} min {round(s % 60)} s"


def bytes_text(b):
    return f"{b / 2**30:.2f} GiB" if b >= 2**30 else f"{b / 2**20:.0f} MiB"


def peak(step, accept):
    values = [m["peak"] for m in step.get("metrics", [])
              if accept(m["name"]) and isinstance(m.get("peak"), (int, float))]
    return max(values) if values else None


def expected(doc):
    """node id -> (lines, marks) as the page must show them."""
    nodes = {}
    for s in doc["steps"]:
        labels = s.get("labels") or {}
        if s["parent_id"] != -1 or "comfyui.node_id" not in labels:
            continue
        vram = peak(s, lambda n: n.startswith("gpu") and n.endswith(".process_used_bytes"))
        if vram is None:
            vram = peak(s, lambda n: n.startswith("alloc.") and n.endswith(".reserved_bytes"))
        nid = labels["comfyui.node_id"]
        assert nid not in nodes, f"node {nid} has two steps: this test's workflow runs each once"
        nodes[nid] = {"cached": labels.get("comfyui.cached") == "true", "ns": s["duration_ns"],
                      "ram": peak(s, lambda n: n == "process.rss_bytes"), "vram": vram,
                      "status": s["status"]}
    ran = {k: v for k, v in nodes.items() if not v["cached"]}

    def top(key):
        have = [(v[key], k) for k, v in ran.items() if v[key] is not None]
        return max(have, key=lambda t: t[0])[1] if have else None

    slowest, ram, vram = top("ns"), top("ram"), top("vram")
    out = {}
    for nid, n in nodes.items():
        if n["cached"]:
            out[nid] = (["cached"], [])
            continue
        first = seconds_text(n["ns"]) + ("" if n["status"] == "ok" else f" · {n['status']}")
        lines = [first]
        memory = []
        if n["ram"] is not None:
            memory.append(f"RAM {bytes_text(n['ram'])}")
        if n["vram"] is not None:
            memory.append(f"VRAM {bytes_text(n['vram'])}")
        if memory:
            lines.append(" · ".join(memory))
        marks = [m for m, who in (("slowest", slowest), ("peak RAM", ram), ("peak VRAM", vram))
                 if who == nid]
        out[nid] = (lines, marks)
    return out


def main():
    result = json.load(open(sys.argv[1]))
    runs = sys.argv[2]
    print(f"frontend {result.get('frontend_version')}, panel as a {result.get('panel_mode')}")
    if not check("the page was driven to the end", result.get("failure") is None,
                 result.get("failure", "")):
        return 1
    cut = result.get("console_before_faults", len(result["console"]))
    ours = [e for e in result["page_errors"] if "genscope" in e]
    check("no uncaught error from the extension (faults included)", not ours, "; ".join(ours)[:2000])
    warnings = [c for c in result["console"][:cut] if "[genscope]" in c]
    check("no warning from the extension", not warnings, "; ".join(warnings)[:2000])
    bad = [r for r in result.get("failed_requests", []) if "/genscope" in r]
    check("every /genscope request answered", not bad, "; ".join(bad))
    graph_ids = {n["id"] for n in result["graph"]}

    for step in result["steps"]:
        label, run = step["label"], step["run"]
        path = os.path.join(runs, f"{run['prompt_id']}.json")
        if not check(f"{label}: the run document of prompt {run['prompt_id']} exists",
                     os.path.isfile(path), path):
            continue
        doc = json.load(open(path))
        want = expected(doc)
        check(f"{label}: the run succeeded", doc["labels"].get("comfyui.status") == "success",
              str(doc["labels"].get("comfyui.status")))
        check(f"{label}: every node of the workflow has figures",
              set(want) == graph_ids and set(step["shown"]) == graph_ids,
              f"graph {sorted(graph_ids)}, run {sorted(want)}, shown {sorted(step['shown'])}")
        check(f"{label}: the extension reported no errors", step["errors"] == 0, str(step["errors"]))
        for nid in sorted(want, key=lambda k: int(k) if k.isdigit() else k):
            lines, marks = want[nid]
            shown = step["shown"].get(nid, {})
            drawn = step["drawn"].get(nid)
            on_canvas = lines + ([" · ".join(marks)] if marks else [])
            check(f"{label}: node {nid} shows {' | '.join(on_canvas)}",
                  shown.get("lines") == lines and shown.get("marks") == marks and drawn == on_canvas,
                  f"shown {shown}, drawn {drawn}")
        if label == "first":
            executed = [k for k, (lines, _) in want.items() if lines != ["cached"]]
            check("first: every node executed (a fresh server)", len(executed) == len(want),
                  f"{len(executed)} of {len(want)}")
            marked = {m for _, (_, ms) in want.items() for m in ms}
            check("first: the slowest and the highest RAM peak are marked",
                  {"slowest", "peak RAM"} <= marked, str(marked))
        if label == "cached":
            check("cached: every node shows 'cached'",
                  all(v == (["cached"], []) for v in want.values()), str(want))

    first, cached = (s["run"]["prompt_id"] for s in result["steps"][:2])
    rows = [r["prompt_id"] for r in result.get("panel_rows", [])]
    check("the panel lists both runs, newest first",
          first in rows and cached in rows and rows.index(cached) < rows.index(first), str(rows))
    for step in result["steps"][:2]:
        row = next((r for r in result.get("panel_rows", []) if r["prompt_id"] == step["run"]["prompt_id"]), None)
        want = seconds_text(step["run"]["duration_ns"])
        check(f"the panel shows the {step['label']} run's time {want}", row is not None and want in row["text"],
              str(row))
    check("'on graph' in the panel shows the first run again", result.get("shown_again") == first,
          str(result.get("shown_again")))
    report = result.get("report") or {}
    check("'report' in the panel opens the first run's HTML report",
          first in report.get("title", "") and "/genscope/runs/" in report.get("url", ""),
          f"{report.get('url')}: {report.get('title')}")
    fault = result.get("fault") or {}
    fault_warnings = [c for c in result["console"][cut:] if "[genscope]" in c]
    check("malformed genscope.run messages change nothing", fault.get("run_kept"), str(fault))
    check("a node whose figures cannot be drawn: one console warning, the extension goes on",
          fault.get("errors", 0) >= 1 and any("drawing" in w for w in fault_warnings)
          and len(fault_warnings) <= 3, str(fault_warnings))
    others = set(fault.get("shown", [])) - {fault.get("broken")}
    check("... and the canvas goes on drawing every other node's figures",
          others and others <= set(fault.get("drawn_after", [])), str(fault))
    placement = result.get("placement") or {}
    check("placement: a subgraph's inner nodes added up on the subgraph node, marked when one is",
          placement.get("12") == {"lines": ["2.50 s", "RAM 3.00 GiB", "2 of 2 nodes run"],
                                  "marks": ["slowest"]}, str(placement.get("12")))
    check("placement: a group node's expansion on its display node, added up with it",
          placement.get("3") == {"lines": ["1.50 s", "RAM 2.00 GiB", "1 of 2 nodes run"],
                                 "marks": ["peak RAM"]},
          str(placement.get("3")))
    check("placement: a node the graph lacks is kept under its own id (drawn nowhere)",
          placement.get("77") == {"lines": ["cached"], "marks": []}, str(placement.get("77")))
    print(f"{len(FAILED)} failed" if FAILED else "comfyui frontend: every check passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
