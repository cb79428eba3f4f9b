// Chrome Trace Event JSON export (see chrome_trace.hpp and docs/report.md).
//
// The rules followed are those of the two viewers' importers:
// - Perfetto: google/perfetto src/trace_processor/importers/json/json_trace_tokenizer.cc and
//   json_trace_parser_impl.cc. The tokenizer looks up "ts" and "dur" in every event and gives
//   up on the whole file when an event has an array as a direct value, so arrays appear only
//   inside "args". Top-level keys other than traceEvents/systemTraceEvents/displayTimeUnit are
//   skipped (older versions stop at unknown keys but read "metadata"), so run metadata goes
//   under "metadata". ts/dur are whole microseconds (ts = round(begin), dur = round(end) -
//   round(begin)): every consumer adds ts + dur in doubles (speedscope, the DevTools trace
//   engine), and exact decimals such as 134147.208 + 13256.315 = 147403.52300000002 end after
//   a successor starting at 147403.523, which breaks nesting there. Integers below 2^53 add
//   exactly. The exact nanoseconds stay in args (start_offset_ns, duration_ns).
//   X slices on one thread track must nest strictly or Perfetto drops them
//   (stat slice_drop_overlapping_complete_event, docs/faq.md): slices that would overlap go to
//   async "b"/"e" tracks (id2.local). Counter ("C") args must be numbers; each args key is one
//   track named "<name> <key>" (chrome://tracing keys counters by name alone, so each metric
//   has its own event name).
// - chrome://tracing: catapult tracing/extras/importer/trace_event_importer.html: known
//   metadata events process_name, process_sort_index, thread_name, thread_sort_index; every
//   top-level key besides traceEvents is shown as metadata.
#include "genscope/chrome_trace.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "genscope/version.hpp"
#include "report/downsample.hpp"
#include "report/export_util.hpp"
#include "report/memory_section.hpp"

namespace genscope {
namespace {

using detail::add_saturated;
using detail::append_int;
using detail::append_json_string;
using detail::append_number;
using detail::round_us;
using nlohmann::json;

enum class SliceKind { kStep = 0, kAttempt = 1, kIteration = 2 };

struct Slice {
  std::int64_t start = 0;
  std::int64_t end = 0;
  SliceKind kind = SliceKind::kStep;
  int depth = 0;         // nesting depth of the owning step
  std::size_t step = 0;  // index of the owning step in run.steps
  std::string name;
  std::string cat;
  std::string args;      // JSON object text
  std::string async_id;  // empty: on the thread track
};

constexpr const char* kLayoutNote =
    "timestamps are whole microseconds from the run start (ts = round(begin), dur = "
    "round(end) - round(begin)); exact nanoseconds in args start_offset_ns and duration_ns. "
    "Attempts and iterations are laid back to back from their step's start: the run document "
    "keeps their durations, not their start times. Category ',inferred': genscope inferred the "
    "slice (e.g. iterations spread over one progress-bar redraw), args inferred: true";

json number_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

// A step's args: short (speedscope names each frame "<name> <args JSON>"), the figures a
// viewer needs; the full figures are in the run document and the CSV export.
std::string step_args(const StepRecord& s) {
  json a{{"step_id", s.id},
         {"parent_id", s.parent_id},
         {"status", std::string(to_string(s.status))},
         {"start_offset_ns", s.start_offset_ns},
         {"duration_ns", s.duration_ns}};
  if (detail::step_inferred(s)) a["inferred"] = true;
  if (!s.error_type.empty() || !s.error_message.empty()) {
    a["error"] = s.error_type.empty() ? s.error_message : s.error_type + ": " + s.error_message;
  }
  for (const MetricFigures& m : s.metrics) {
    if (m.unit == Unit::kBytes && std::isfinite(m.peak) && !detail::is_constant_metric(m.name) &&
        !detail::is_headroom_metric(m.name)) {
      a["peak." + m.name] = m.peak;
    }
  }
  if (!s.iteration_ns.empty()) {
    a["iterations"] = s.iteration_ns.size();
    if (detail::iterations_inferred(s)) a["iterations_inferred"] = true;
  }
  for (const auto& [k, v] : s.counters) a["counter." + k] = number_or_null(v);
  return a.dump(-1, ' ', false, json::error_handler_t::replace);
}

// The category of a slice: its kind, and ",inferred" (a second category, as the format allows)
// when genscope inferred it rather than observed it.
std::string category(std::string kind, bool inferred) {
  return inferred ? kind + ",inferred" : kind;
}

std::string object_text(std::initializer_list<std::pair<const char*, double>> fields,
                        bool inferred) {
  std::string out = "{";
  for (const auto& [key, value] : fields) {
    if (out.size() > 1) out += ',';
    append_json_string(out, key);
    out += ':';
    append_number(out, value);
  }
  return out + (inferred ? ",\"inferred\":true}" : "}");
}

// The slices of one run: steps, their attempts and their iterations (clamped into the step).
std::vector<Slice> collect_slices(const Run& run, const ChromeTraceOptions& options) {
  const std::vector<int> depth = detail::step_depths(run);
  std::vector<Slice> slices;
  for (std::size_t i = 0; i < run.steps.size(); ++i) {
    const StepRecord& s = run.steps[i];
    const std::int64_t start = s.start_offset_ns;
    const std::int64_t end = add_saturated(start, std::max<std::int64_t>(s.duration_ns, 0));
    slices.push_back(Slice{start,
                           end,
                           SliceKind::kStep,
                           depth[i],
                           i,
                           s.name,
                           category(std::string(to_string(s.kind)), detail::step_inferred(s)),
                           step_args(s),
                           {}});
    std::int64_t t = start;
    for (std::size_t a = 0; a < s.attempts.size(); ++a) {
      const Attempt& at = s.attempts[a];
      const std::int64_t a_end =
          std::min(end, add_saturated(t, std::max<std::int64_t>(at.duration_ns, 0)));
      json args{{"step_id", s.id},
                {"outcome", std::string(to_string(at.outcome))},
                {"duration_ns", at.duration_ns}};
      if (!at.error.empty()) args["error"] = at.error;
      slices.push_back(Slice{t,
                             a_end,
                             SliceKind::kAttempt,
                             depth[i],
                             i,
                             "attempt " + std::to_string(a + 1) + ": " + at.strategy,
                             category("attempt", detail::step_inferred(s)),
                             args.dump(-1, ' ', false, json::error_handler_t::replace),
                             {}});
      t = a_end;
    }
    const std::size_t n = s.iteration_ns.size();
    const std::size_t groups = std::min(n, std::max<std::size_t>(options.max_iteration_slices, 1));
    t = start;
    for (std::size_t g = 0; g < groups; ++g) {
      const std::size_t first = g * n / groups, last = (g + 1) * n / groups;  // [first, last)
      std::int64_t total = 0, low = s.iteration_ns[first], high = low;
      for (std::size_t k = first; k < last; ++k) {
        total = add_saturated(total, std::max<std::int64_t>(s.iteration_ns[k], 0));
        low = std::min(low, s.iteration_ns[k]);
        high = std::max(high, s.iteration_ns[k]);
      }
      const std::int64_t it_end = std::min(end, add_saturated(t, total));
      const bool inferred = detail::iterations_inferred(s);
      Slice slice{t, it_end, SliceKind::kIteration,           depth[i],
                  i, {},     category("iteration", inferred), {},
                  {}};
      if (last - first == 1) {
        slice.name = "iteration " + std::to_string(first + 1);
        slice.args = object_text({{"step_id", static_cast<double>(s.id)},
                                  {"duration_ns", static_cast<double>(s.iteration_ns[first])}},
                                 inferred);
      } else {
        slice.name = "iterations " + std::to_string(first + 1) + "-" + std::to_string(last);
        slice.args = object_text(
            {{"step_id", static_cast<double>(s.id)},
             {"count", static_cast<double>(last - first)},
             {"mean_ns", static_cast<double>(total) / static_cast<double>(last - first)},
             {"min_ns", static_cast<double>(low)},
             {"max_ns", static_cast<double>(high)}},
            inferred);
      }
      slices.push_back(std::move(slice));
      t = it_end;
    }
  }
  return slices;
}

// Puts each slice on its thread's track when it nests there, else on an async track: a step
// of its own, or one per step for its attempts and one for its iterations.
void place_slices(const Run& run, std::vector<Slice>& slices) {
  std::stable_sort(slices.begin(), slices.end(), [&run](const Slice& a, const Slice& b) {
    const int ta = run.steps[a.step].thread, tb = run.steps[b.step].thread;
    if (ta != tb) return ta < tb;
    if (a.start != b.start) return a.start < b.start;
    if (a.end != b.end) return a.end > b.end;  // the enclosing slice first
    if (a.kind != b.kind) return a.kind < b.kind;
    return a.depth < b.depth;
  });
  std::vector<char> step_async(run.steps.size(), 0);
  std::vector<std::int64_t> open_ends;  // ends of the open slices of the current thread
  int thread = -1;
  for (Slice& s : slices) {
    const int t = run.steps[s.step].thread;
    if (t != thread) {
      open_ends.clear();
      thread = t;
    }
    const int id = run.steps[s.step].id;
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%x",
                  static_cast<unsigned>(id) * 4u + static_cast<unsigned>(s.kind) + 1u);
    if (s.kind != SliceKind::kStep && step_async[s.step]) {
      s.async_id = buf;
      continue;
    }
    // A slice under half a microsecond is zero long once rounded: on a thread track its place
    // is ambiguous (a consumer puts it inside a sibling starting at the same microsecond), so
    // it goes to an async track, as an overlapping slice does.
    if (round_us(s.end) == round_us(s.start)) {
      s.async_id = buf;
      if (s.kind == SliceKind::kStep) step_async[s.step] = 1;
      continue;
    }
    while (!open_ends.empty() && open_ends.back() <= s.start) open_ends.pop_back();
    if (open_ends.empty() || s.end <= open_ends.back()) {
      open_ends.push_back(s.end);
    } else {
      s.async_id = buf;
      if (s.kind == SliceKind::kStep) step_async[s.step] = 1;
    }
  }
}

void begin_event(std::string& out, const char* ph, int pid) {
  out += out.back() == '[' ? "\n{\"ph\":\"" : ",\n{\"ph\":\"";
  out += ph;
  out += "\",\"pid\":";
  append_int(out, pid);
}

void metadata_event(std::string& out, int pid, int tid, const char* name, const std::string& key,
                    const std::string& value_json) {
  begin_event(out, "M", pid);
  if (tid >= 0) {
    out += ",\"tid\":";
    append_int(out, tid);
  }
  out += ",\"name\":\"";
  out += name;
  out += "\",\"args\":{\"";
  out += key;
  out += "\":";
  out += value_json;
  out += "}}";
}

std::string json_string(const std::string& s) {
  std::string out;
  append_json_string(out, s);
  return out;
}

// A series whose every value is the same (total memory): no track, its value in metadata.
bool constant_column(const TimeSeries& ts, std::size_t m, double& value) {
  const std::size_t width = ts.metrics.size();
  bool seen = false;
  for (std::size_t row = 0; row < ts.size(); ++row) {
    const double v = ts.values[row * width + m];
    if (!std::isfinite(v)) continue;
    if (seen && v != value) return false;
    seen = true;
    value = v;
  }
  return seen;
}

// The exact per-step peaks of one metric as points (run offset, value): at the peak's own
// time, or for a high-water mark without a time at the highest sample inside the step (the
// console's "time sampled"); a step with no sample inside has no time for it and no point.
std::vector<std::pair<std::int64_t, double>> exact_peaks(const Run& run,
                                                         const std::string& metric) {
  std::vector<std::pair<std::int64_t, double>> points;
  for (const StepRecord& s : run.steps) {
    const MetricFigures* m = s.metric(metric);
    if (m == nullptr || m->peak_source != "exact" || !std::isfinite(m->peak)) continue;
    if (m->peak_offset_ns >= 0) {
      points.emplace_back(add_saturated(s.start_offset_ns, m->peak_offset_ns), m->peak);
      continue;
    }
    const detail::SampledPeak h = detail::highest_sample(
        run, metric, s.start_offset_ns, add_saturated(s.start_offset_ns, s.duration_ns));
    if (h.found) points.emplace_back(h.offset_ns, m->peak);
  }
  std::sort(points.begin(), points.end());
  return points;
}

// Writes one counter track per varying metric; returns the constant ones (name -> value).
json write_counters(std::string& out, const Run& run, int pid, std::int64_t offset,
                    const ChromeTraceOptions& options) {
  json constants = json::object();
  const TimeSeries& ts = run.series;
  const std::size_t width = ts.metrics.size();
  if (ts.values.size() != width * ts.size()) return constants;  // malformed: nothing safe to draw
  for (std::size_t m = 0; m < width; ++m) {
    double constant = 0;
    if (constant_column(ts, m, constant)) {
      constants[ts.metrics[m]] = constant;
      continue;
    }
    // One track per metric: the event name is the metric name (unique, its unit in its
    // suffix), the one args key "value" (Perfetto names the track "<name> value").
    const std::string name_json = json_string(ts.metrics[m]);
    std::vector<std::pair<std::int64_t, double>> points;
    for (std::size_t row :
         detail::minmax_rows(ts.offset_ns, ts.values.data() + m, width, options.counter_spans)) {
      points.emplace_back(ts.offset_ns[row], ts.values[row * width + m]);
    }
    const auto peaks = exact_peaks(run, ts.metrics[m]);
    if (!peaks.empty()) {
      points.insert(points.end(), peaks.begin(), peaks.end());
      std::stable_sort(points.begin(), points.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
    }
    bool first = true;
    double last = 0;
    for (const auto& [t, v] : points) {
      // A counter holds its value until the next event: repeats add nothing. Perfetto cannot
      // draw a gap, so a missing sample (NaN) is left out.
      if (!std::isfinite(v) || (!first && v == last)) continue;
      first = false;
      last = v;
      begin_event(out, "C", pid);
      out += ",\"name\":" + name_json + ",\"ts\":";
      append_int(out, round_us(add_saturated(t, offset)));
      out += ",\"args\":{\"value\":";
      append_number(out, v);
      out += "}}";
    }
  }
  return constants;
}

json distributed_meta(const DistributedInfo& d) {
  return json{{"role", d.role},         {"rank", d.rank},           {"world_size", d.world_size},
              {"local_rank", d.local_rank}, {"node_rank", d.node_rank}, {"group", d.group}};
}

// Holistic Trace Analysis finds a trace's rank with the pattern "rank":<whitespace><digits>
// anywhere in the file (the first match), so the rank trace opens with this object, written
// with a space after each colon; nothing else in the trace has that spelling.
std::string distributed_info(const DistributedInfo& d) {
  std::string out = "\"distributedInfo\": {\"rank\": " + std::to_string(d.rank) +
                    ", \"world_size\": " + std::to_string(d.world_size);
  if (d.local_rank >= 0) out += ", \"local_rank\": " + std::to_string(d.local_rank);
  if (!d.group.empty()) out += ", \"group\": " + json_string(d.group);
  return out + "},\n";
}

json run_metadata(const Run& run, int pid, const ChromeTraceOptions& options, json constants) {
  json gpus = json::array();
  for (const GpuInfo& g : run.gpus) {
    gpus.push_back(json{{"index", g.index},
                        {"name", g.name},
                        {"uuid", g.uuid},
                        {"driver_version", g.driver_version},
                        {"total_bytes", g.total_bytes}});
  }
  json meta = json{{"pid", pid},
              {"id", run.id},
              {"start_utc", run.start_utc},
              {"start_unix_ns", run.start_unix_ns},
              {"duration_ns", run.duration_ns},
              {"genscope_version", run.genscope_version},
              {"pipeline", json{{"name", run.pipeline.name},
                                {"model", run.pipeline.model},
                                {"architecture", run.pipeline.architecture},
                                {"parameters", run.pipeline.parameters}}},
              {"labels", run.labels},
              {"host", json{{"hostname", run.host.hostname},
                            {"cpu_model", run.host.cpu_model},
                            {"cpu_cores", run.host.cpu_cores},
                            {"ram_bytes", run.host.ram_bytes},
                            {"os", run.host.os}}},
              {"gpus", std::move(gpus)},
              {"probes", run.probes},
              {"notes", run.notes},
              {"series", json{{"interval_ns", run.series.interval_ns},
                              {"samples_taken", run.series.samples_taken},
                              {"samples_stored", run.series.size()},
                              {"counter_spans", options.counter_spans},
                              {"constant", std::move(constants)}}}};
  if (run.distributed) meta["distributed"] = distributed_meta(*run.distributed);
  return meta;
}

// Writes one run's events; returns its constant series (for metadata).
json write_run(std::string& out, const Run& run, int pid, std::int64_t offset,
               const ChromeTraceOptions& options) {
  std::string process = "genscope";
  if (run.distributed) {
    process = run.distributed->role == "launcher" ? "launcher: genscope"
                                                  : "rank " + std::to_string(run.distributed->rank) + ": genscope";
  }
  if (!run.pipeline.name.empty()) process += ": " + run.pipeline.name;
  if (!run.pipeline.model.empty()) process += " (" + run.pipeline.model + ")";
  process += " run " + run.id.substr(0, 8);
  metadata_event(out, pid, -1, "process_name", "name", json_string(process));
  metadata_event(out, pid, -1, "process_sort_index", "sort_index", std::to_string(pid));
  std::vector<int> threads;
  for (const StepRecord& s : run.steps) threads.push_back(s.thread);
  std::sort(threads.begin(), threads.end());
  threads.erase(std::unique(threads.begin(), threads.end()), threads.end());
  for (int t : threads) {
    metadata_event(out, pid, t + 1, "thread_name", "name",
                   json_string("thread " + std::to_string(t)));
    metadata_event(out, pid, t + 1, "thread_sort_index", "sort_index", std::to_string(t));
  }

  std::vector<Slice> slices = collect_slices(run, options);
  place_slices(run, slices);
  for (const Slice& s : slices) {
    const int tid = run.steps[s.step].thread + 1;
    const std::string name = json_string(s.name), cat = json_string(s.cat);
    if (s.async_id.empty()) {
      begin_event(out, "X", pid);
      out += ",\"tid\":";
      append_int(out, tid);
      out += ",\"ts\":";
      append_int(out, round_us(add_saturated(s.start, offset)));
      out += ",\"dur\":";
      append_int(out, round_us(add_saturated(s.end, offset)) - round_us(add_saturated(s.start, offset)));
      out += ",\"cat\":" + cat + ",\"name\":" + name + ",\"args\":" + s.args + "}";
      continue;
    }
    for (const bool begin : {true, false}) {
      begin_event(out, begin ? "b" : "e", pid);
      out += ",\"tid\":";
      append_int(out, tid);
      out += ",\"ts\":";
      append_int(out, round_us(add_saturated(begin ? s.start : s.end, offset)));
      out +=
          ",\"cat\":" + cat + ",\"name\":" + name + ",\"id2\":{\"local\":\"" + s.async_id + "\"}";
      if (begin) out += ",\"args\":" + s.args;
      out += "}";
    }
  }
  json constants = write_counters(out, run, pid, offset, options);
  for (const MonitoringError& e : run.monitoring_errors) {
    begin_event(out, "i", pid);
    out += ",\"s\":\"p\",\"ts\":";
    append_int(out, round_us(add_saturated(e.offset_ns, offset)));
    out +=
        ",\"cat\":\"monitoring_error\",\"name\":" + json_string("monitoring error: " + e.source) +
        ",\"args\":{\"message\":" + json_string(e.message) + ",\"step\":" + json_string(e.step) +
        "}}";
  }
  return constants;
}

}  // namespace

std::string render_chrome_trace(std::span<const Run> runs, const ChromeTraceOptions& options) {
  std::string out = "{";
  if (runs.size() == 1 && runs[0].distributed && runs[0].distributed->role == "rank") {
    out += distributed_info(*runs[0].distributed);
  }
  out += "\"traceEvents\":[";
  json meta_runs = json::array();
  int pid = 1;
  for (const Run& run : runs) {
    const std::size_t i = static_cast<std::size_t>(pid - 1);
    const std::int64_t offset = i < options.run_offsets_ns.size() ? options.run_offsets_ns[i] : 0;
    json constants = write_run(out, run, pid, offset, options);
    meta_runs.push_back(run_metadata(run, pid, options, std::move(constants)));
    ++pid;
  }
  const json metadata{{"generator", std::string("genscope ") + version()},
                      {"schema", kRunSchema},
                      {"layout", kLayoutNote},
                      {"runs", std::move(meta_runs)}};
  out += "\n],\n\"metadata\":";
  out += metadata.dump(-1, ' ', false, json::error_handler_t::replace);
  out += "}\n";
  return out;
}

std::string render_chrome_trace(const Run& run, const ChromeTraceOptions& options) {
  return render_chrome_trace(std::span<const Run>(&run, 1), options);
}

}  // namespace genscope
