#!/usr/bin/env python3
"""Checks what a real OpenTelemetry Collector received from genscope's OTLP export.

    check_export.py RUN.json COLLECTOR_OUT.json PROMETHEUS.txt

COLLECTOR_OUT.json is the collector's file exporter output (OTLP JSON, one request per line);
PROMETHEUS.txt is `genscope report RUN.json --metrics -` (the same run's Prometheus figures).
Every step of the run document must be one span of the run's trace, with its parent's span as
parent (the run's root span for a top-level step), its times, kind, status, figures, counters,
labels and iterations; the resource must carry service.name, host and labels; every metric
point must equal the Prometheus sample of the same name and labels, and the other way round.
Exits 1 naming every difference.
"""
import json
import math
import re
import sys
import time

problems = []


def check(ok, message):
    if not ok:
        problems.append(message)


def any_value(v):
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "boolValue" in v:
        return v["boolValue"]
    return None


def attrs(obj):
    return {a["key"]: any_value(a.get("value", {})) for a in obj.get("attributes", [])}


def close(a, b):
    if a is None or b is None:
        return a is None and b is None
    return a == b or abs(a - b) <= 1e-9 * max(abs(a), abs(b))


def number(v):
    return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else float(v)


def parse_prometheus(text):
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$', line)
        if not m:
            problems.append(f"unreadable Prometheus line: {line}")
            continue
        labels = {}
        for k, v in re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3) or ""):
            labels[k] = v.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
        samples[(m.group(1), tuple(sorted(labels.items())))] = float(m.group(4))
    return samples


def read_requests(path, run_id, wait_s=15.0):
    """The collector's requests, once its file holds the run's trace and metrics (the file
    exporter writes in the background: waits up to wait_s for whole lines)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            lines = [line for line in open(path) if line.strip()]
            requests = [json.loads(line) for line in lines]
            text = "".join(lines)
            if '"resourceSpans"' in text and '"resourceMetrics"' in text and text.count(run_id) >= 2:
                return requests
        except (OSError, ValueError):
            pass  # not written yet, or a line still being written
        if time.monotonic() > deadline:
            return requests if "requests" in locals() else []
        time.sleep(0.1)


def main():
    run = json.load(open(sys.argv[1]))
    requests = read_requests(sys.argv[2], run["id"])
    prometheus = parse_prometheus(open(sys.argv[3]).read())

    spans, resources = [], []
    points = {}
    for req in requests:
        for rs in req.get("resourceSpans", []):
            res = attrs(rs.get("resource", {}))
            if res.get("genscope.run.id") != run["id"]:
                continue
            resources.append(res)
            for ss in rs.get("scopeSpans", []):
                check(ss.get("scope", {}).get("name") == "genscope", "scope is not genscope")
                spans.extend(ss.get("spans", []))
        for rm in req.get("resourceMetrics", []):
            res = attrs(rm.get("resource", {}))
            if res.get("genscope.run.id") != run["id"]:
                continue
            resources.append(res)
            for sm in rm.get("scopeMetrics", []):
                for metric in sm.get("metrics", []):
                    name = metric["name"]
                    if "gauge" in metric or "sum" in metric:
                        body = metric.get("gauge") or metric.get("sum")
                        if "sum" in metric:
                            check(metric["sum"].get("isMonotonic") is True, f"{name}: sum not monotonic")
                            check(metric["sum"].get("aggregationTemporality") == 2, f"{name}: not cumulative")
                        for p in body.get("dataPoints", []):
                            key = (name, tuple(sorted((k, str(v)) for k, v in attrs(p).items())))
                            points[key] = float(p.get("asDouble", p.get("asInt", "nan")))
                    elif "histogram" in metric:
                        for p in metric["histogram"].get("dataPoints", []):
                            labels = tuple(sorted((k, str(v)) for k, v in attrs(p).items()))
                            points[(name + "_count", labels)] = float(p["count"])
                            points[(name + "_sum", labels)] = float(p.get("sum", 0))
                            bounds = p.get("explicitBounds", [])
                            counts = [int(c) for c in p.get("bucketCounts", [])]
                            check(len(counts) == len(bounds) + 1, f"{name}: {len(counts)} buckets for {len(bounds)} bounds")
                            total = 0
                            for i, b in enumerate(bounds + [math.inf]):
                                total += counts[i] if i < len(counts) else 0
                                le = "+Inf" if b == math.inf else (str(int(b)) if float(b).is_integer() else repr(float(b)))
                                points[(name + "_bucket", tuple(sorted(labels + (("le", le),))))] = float(total)

    check(len(resources) >= 2, f"expected a trace and metrics request for run {run['id']}, got {len(resources)}")
    for res in resources:
        check(res.get("service.name") == "genscope", f"service.name {res.get('service.name')!r}")
        check(res.get("host.name") == (run.get("host", {}).get("hostname") or None), f"host.name {res.get('host.name')!r}")
        for k, v in run.get("labels", {}).items():
            check(res.get("genscope.label." + k) == v, f"resource label {k}: {res.get('genscope.label.' + k)!r} != {v!r}")
        check(res.get("genscope.pipeline.name") == (run.get("pipeline", {}).get("name") or None),
              f"pipeline name {res.get('genscope.pipeline.name')!r}")

    # Spans: the trace id is the run id; one root; one span per step, parented as the steps.
    # (a run id that is not 128 bits of hex is hashed into one: all spans still share it)
    hex_id = re.fullmatch(r"[0-9a-fA-F]{32}", run["id"]) and run["id"].strip("0")
    want_trace = run["id"].lower() if hex_id else (spans[0]["traceId"] if spans else None)
    for s in spans:
        check(s["traceId"] == want_trace and re.fullmatch(r"[0-9a-f]{32}", s["traceId"]),
              f"span {s['name']}: trace id {s['traceId']} != {want_trace}")
    roots = [s for s in spans if not s.get("parentSpanId")]
    check(len(roots) == 1, f"{len(roots)} root spans")
    by_step = {}
    for s in spans:
        a = attrs(s)
        if "genscope.step.id" in a:
            check(a["genscope.step.id"] not in by_step, f"step {a['genscope.step.id']} has two spans")
            by_step[a["genscope.step.id"]] = (s, a)
    check(len(by_step) == len(run["steps"]), f"{len(by_step)} step spans for {len(run['steps'])} steps")
    start = run.get("start_unix_ns", 0)
    root_id = roots[0]["spanId"] if roots else None
    if roots:
        check(int(roots[0].get("startTimeUnixNano", 0)) == start, "root span start != run start")
        check(int(roots[0].get("endTimeUnixNano", 0)) == start + run.get("duration_ns", 0), "root span end != run end")
    for step in run["steps"]:
        sid = step["id"]
        if sid not in by_step:
            problems.append(f"step {sid} {step['name']!r}: no span")
            continue
        s, a = by_step[sid]
        where = f"step {sid} {step['name']!r}"
        check(s["name"] == step["name"], f"{where}: span name {s['name']!r}")
        parent = step.get("parent_id", -1)
        want_parent = root_id if parent < 0 else (by_step[parent][0]["spanId"] if parent in by_step else None)
        check(s.get("parentSpanId") == want_parent, f"{where}: parent {s.get('parentSpanId')} != {want_parent}")
        check(int(s.get("startTimeUnixNano", 0)) == start + step.get("start_offset_ns", 0), f"{where}: start time")
        check(int(s.get("endTimeUnixNano", 0)) == start + step.get("start_offset_ns", 0) + step.get("duration_ns", 0), f"{where}: end time")
        check(a.get("genscope.step.kind") == step.get("kind", "custom"), f"{where}: kind {a.get('genscope.step.kind')!r}")
        check(a.get("genscope.step.status") == step.get("status", "ok"), f"{where}: status {a.get('genscope.step.status')!r}")
        check(a.get("genscope.step.duration_ns") == step.get("duration_ns", 0), f"{where}: duration")
        failed = step.get("status") == "failed"
        check((s.get("status", {}).get("code") == 2) == failed, f"{where}: span status {s.get('status')}")
        for m in step.get("metrics", []):
            for field in ("before", "peak", "after"):
                got = a.get(f"genscope.metric.{m['name']}.{field}")
                check(close(number(got), number(m.get(field))), f"{where}: {m['name']}.{field} {got} != {m.get(field)}")
            if m.get("peak_offset_ns", -1) >= 0:
                check(a.get(f"genscope.metric.{m['name']}.peak_offset_ns") == m["peak_offset_ns"], f"{where}: {m['name']} peak time")
        for k, v in step.get("counters", {}).items():
            check(close(a.get("genscope.counter." + k), float(v)), f"{where}: counter {k}")
        for k, v in step.get("labels", {}).items():
            check(a.get("genscope.step.label." + k) == v, f"{where}: label {k}")
        iterations = (step.get("iterations") or {}).get("durations_ns", [])
        events = [e for e in s.get("events", []) if e["name"] == "iteration"]
        check(len(events) == min(len(iterations), 1000), f"{where}: {len(events)} iteration events for {len(iterations)}")
        for i, e in enumerate(events):
            ea = attrs(e)
            check(ea.get("genscope.iteration.index") == i and ea.get("genscope.iteration.duration_ns") == iterations[i],
                  f"{where}: iteration event {i}")
        if iterations:
            check(a.get("genscope.iterations.count") == len(iterations), f"{where}: iterations.count")

    # Metrics: the same points as the Prometheus export, both ways.
    for key, value in prometheus.items():
        check(key in points, f"metric {key} in Prometheus, not in OTLP")
        if key in points:
            check(close(points[key], value), f"metric {key}: OTLP {points[key]} != Prometheus {value}")
    for key in points:
        check(key in prometheus, f"metric {key} in OTLP, not in Prometheus")

    if problems:
        for p in problems[:50]:
            print("FAIL:", p)
        print(f"{len(problems)} difference(s)")
        return 1
    print(f"ok: {len(by_step)} step spans, {len(points)} metric points for run {run['id']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
