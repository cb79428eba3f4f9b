"""Where finished runs go: one run document per prompt in a folder, a short in-memory list of
recent runs for the routes, and the counters of /genscope/metrics."""

import logging
import os
import re
import threading

_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

log = logging.getLogger("genscope.comfyui")


_GPU_PROCESS = re.compile(r"^gpu\d+\.process_used_bytes$")
_CUDA_ALLOCATED = re.compile(r"^alloc\.cuda:\d+\.allocated_bytes$")  # not .reserved_bytes


def _peak(doc, prefix):
    """The highest step peak of the metrics whose name starts with `prefix` (or matches it, a
    compiled pattern), or None."""
    best = None
    for step in doc.get("steps", []):
        for metric in step.get("metrics", []):
            name = metric.get("name", "")
            found = prefix.match(name) if hasattr(prefix, "match") else name.startswith(prefix)
            if found and metric.get("peak") is not None:
                if best is None or metric["peak"] > best:
                    best = metric["peak"]
    return best


def _gib(value):
    return "n/a" if value is None else f"{value / 2**30:.2f} GiB"


def summarize(doc, summary, path):
    """The entry of GET /genscope/runs for one run."""
    return {
        "prompt_id": summary.get("prompt_id"),
        "run_id": doc.get("id"),
        "status": summary.get("status"),
        "start_utc": doc.get("start_utc"),
        "duration_ns": doc.get("duration_ns"),
        "nodes_executed": summary.get("nodes_executed"),
        "nodes_cached": summary.get("nodes_cached"),
        "failed_node": summary.get("failed_node"),
        "peak_rss_bytes": _peak(doc, "process.rss_bytes"),
        "peak_gpu_process_bytes": _peak(doc, _GPU_PROCESS),
        "peak_cuda_allocated_bytes": _peak(doc, _CUDA_ALLOCATED),
        "cuda_allocated_excludes_managed_weights":
            (doc.get("labels") or {}).get("comfyui.allocator_excludes_managed_weights") == "true",
        "model": (doc.get("pipeline") or {}).get("model"),
        "document": path,
    }


def log_line(doc, summary, path):
    """`genscope: prompt ID success in 25.10 s, 7 nodes run, 0 cached, peak RSS 5.91 GiB[, peak
    GPU (process, NVML) ...][, peak CUDA allocated ...] -> PATH`: NVML's per-process figure
    first, as it includes what torch's allocator does not see (comfy-aimdo's weights)."""
    line = (f"genscope: prompt {summary.get('prompt_id')} {summary.get('status')} in "
            f"{doc.get('duration_ns', 0) / 1e9:.2f} s, {summary.get('nodes_executed')} nodes run, "
            f"{summary.get('nodes_cached')} cached, peak RSS {_gib(_peak(doc, 'process.rss_bytes'))}")
    gpu = _peak(doc, _GPU_PROCESS)
    if gpu is not None:
        line += f", peak GPU (process, NVML) {_gib(gpu)}"
    cuda = _peak(doc, _CUDA_ALLOCATED)
    if cuda is not None:
        line += f", peak CUDA allocated {_gib(cuda)}"
        if (doc.get("labels") or {}).get("comfyui.allocator_excludes_managed_weights") == "true":
            line += " (without the weights dynamic VRAM manages)"
    return line + (f" -> {path}" if path else "")


class RunStore:
    """Run documents in `folder` (<prompt id>.json), the latest `keep` summaries in memory."""

    def __init__(self, folder, write_run, read_run, keep=100):
        self.folder = folder
        self.write_run = write_run
        self.read_run = read_run
        self.keep = keep
        self.lock = threading.Lock()
        self.recent = []  # newest last
        self.last_doc = None
        self.docs = {}  # prompt id -> document not written yet (or not writable)
        self.keep_docs = 20
        self.prompts = {}  # status -> count
        self.nodes = {}  # (class_type, status) -> [count, seconds]

    def path_of(self, prompt_id):
        if not isinstance(prompt_id, str) or not _SAFE_ID.match(prompt_id):
            return None
        return os.path.join(self.folder, prompt_id + ".json")

    def add(self, doc, summary):
        """Counts a finished run and keeps it in memory (cheap: ComfyUI's thread calls it);
        returns its entry of GET /genscope/runs. write() puts it on disk."""
        entry = summarize(doc, summary, None)
        with self.lock:
            self.recent.append(entry)
            del self.recent[:-self.keep]
            self.last_doc = doc
            self.docs[entry["prompt_id"]] = doc
            while len(self.docs) > self.keep_docs:
                self.docs.pop(next(iter(self.docs)))
            self.prompts[summary.get("status")] = self.prompts.get(summary.get("status"), 0) + 1
            for step in doc.get("steps", []):
                labels = step.get("labels") or {}
                cls = labels.get("comfyui.class_type")
                if cls is None or step.get("parent_id", -1) != -1:
                    continue
                key = (cls, step.get("status"))
                count = self.nodes.setdefault(key, [0, 0.0])
                count[0] += 1
                count[1] += (step.get("duration_ns") or 0) / 1e9
        return entry

    def write(self, doc, entry):
        """Writes the run document (never raises); returns its path or None."""
        path = self.path_of(str(entry.get("prompt_id")))
        if path is None:
            return None
        try:
            os.makedirs(self.folder, exist_ok=True)
            self.write_run(doc, path)
        except Exception as e:
            log.warning("genscope: cannot write the run document %s: %s", path, e)
            return None
        with self.lock:
            entry["document"] = path
            self.docs.pop(entry.get("prompt_id"), None)  # on disk from now on
        return path

    def list(self):
        """Recent runs, newest first, plus documents in the folder from earlier sessions."""
        with self.lock:
            entries = list(reversed(self.recent))
        known = {e["prompt_id"] for e in entries}
        try:
            files = sorted((f for f in os.listdir(self.folder) if f.endswith(".json")),
                           key=lambda f: os.path.getmtime(os.path.join(self.folder, f)),
                           reverse=True)
        except OSError:
            files = []
        for name in files[: self.keep]:
            prompt_id = name[:-5]
            if prompt_id not in known and len(entries) < self.keep:
                entries.append({"prompt_id": prompt_id,
                                "document": os.path.join(self.folder, name)})
        return entries

    def document(self, prompt_id):
        """The run document of a prompt (dict) or None."""
        with self.lock:
            doc = self.docs.get(prompt_id)
        if doc is not None:
            return doc
        path = self.path_of(prompt_id)
        if path is None or not os.path.isfile(path):
            return None
        return self.read_run(path)

    def comfyui_metrics(self):
        """Counters over every prompt this server ran, in Prometheus text 0.0.4."""
        def esc(value):
            return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
        with self.lock:
            prompts = dict(self.prompts)
            nodes = {k: list(v) for k, v in self.nodes.items()}
        lines = ["# HELP genscope_comfyui_prompts_total Prompts finished, by outcome.",
                 "# TYPE genscope_comfyui_prompts_total counter"]
        for status, count in sorted(prompts.items(), key=lambda kv: str(kv[0])):
            lines.append(f'genscope_comfyui_prompts_total{{status="{esc(status)}"}} {count}')
        lines += ["# HELP genscope_comfyui_nodes_total Nodes of finished prompts, by class and "
                  "status (ok, failed, skipped = served from ComfyUI's cache).",
                  "# TYPE genscope_comfyui_nodes_total counter"]
        for (cls, status), (count, _) in sorted(nodes.items(), key=lambda kv: str(kv[0])):
            lines.append(f'genscope_comfyui_nodes_total{{class_type="{esc(cls)}",'
                         f'status="{esc(status)}"}} {count}')
        lines += ["# HELP genscope_comfyui_node_seconds_total Time spent in nodes, by class.",
                  "# TYPE genscope_comfyui_node_seconds_total counter"]
        for (cls, status), (_, seconds) in sorted(nodes.items(), key=lambda kv: str(kv[0])):
            lines.append(f'genscope_comfyui_node_seconds_total{{class_type="{esc(cls)}",'
                         f'status="{esc(status)}"}} {seconds:.6f}')
        return "\n".join(lines) + "\n"
