// CSV export (see csv_export.hpp): RFC 4180 fields, CRLF records, raw units as in the run
// document (ns, bytes), numbers in their shortest round-trip form.
#include "genscope/csv_export.hpp"

#include <algorithm>
#include <system_error>

#include "genscope/error.hpp"
#include "genscope/run_json.hpp"
#include "report/export_util.hpp"

namespace genscope {
namespace {

using detail::append_int;
using detail::append_number;

// Writes one record at a time. RFC 4180 section 2: fields containing a comma, a double quote,
// CR or LF are enclosed in double quotes, and a double quote inside is escaped by another.
class CsvWriter {
 public:
  explicit CsvWriter(std::string& out) : out_(out) {}
  void text(std::string_view value) {
    separate();
    if (value.find_first_of(",\"\r\n") == std::string_view::npos) {
      out_ += value;
      return;
    }
    out_ += '"';
    for (char c : value) {
      if (c == '"') out_ += '"';
      out_ += c;
    }
    out_ += '"';
  }
  void number(double value) {
    separate();
    append_number(out_, value, "");
  }
  void integer(std::int64_t value) {
    separate();
    append_int(out_, value);
  }
  void end_record() {
    out_ += "\r\n";
    first_ = true;
  }

 private:
  void separate() {
    if (!first_) out_ += ',';
    first_ = false;
  }
  std::string& out_;
  bool first_ = true;
};

// Names in order of first appearance over every step of every run.
template <typename Get>
std::vector<std::string> union_names(std::span<const Run> runs, Get names_of) {
  std::vector<std::string> all;
  for (const Run& run : runs) {
    for (const StepRecord& s : run.steps) {
      for (const std::string& name : names_of(s)) {
        if (std::find(all.begin(), all.end(), name) == all.end()) all.push_back(name);
      }
    }
  }
  return all;
}

}  // namespace

std::string render_steps_csv(std::span<const Run> runs) {
  const std::vector<std::string> metrics = union_names(runs, [](const StepRecord& s) {
    std::vector<std::string> n;
    for (const MetricFigures& m : s.metrics) n.push_back(m.name);
    return n;
  });
  const std::vector<std::string> counters = union_names(runs, [](const StepRecord& s) {
    std::vector<std::string> n;
    for (const auto& [k, v] : s.counters) n.push_back(k);
    return n;
  });
  const std::vector<std::string> labels = union_names(runs, [](const StepRecord& s) {
    std::vector<std::string> n;
    for (const auto& [k, v] : s.labels) n.push_back(k);
    return n;
  });

  std::string out;
  CsvWriter w(out);
  for (const char* h : {"run_id",
                        "step_id",
                        "parent_id",
                        "depth",
                        "name",
                        "kind",
                        "status",
                        "inferred",
                        "thread",
                        "start_offset_ns",
                        "duration_ns",
                        "share_of_run_percent",
                        "error_type",
                        "error_message",
                        "source",
                        "attempts",
                        "attempt_chain",
                        "strategy_used",
                        "iterations",
                        "iterations_inferred",
                        "iterations_per_second",
                        "iteration_first_ns",
                        "iteration_mean_ns",
                        "iteration_p50_ns",
                        "iteration_p95_ns"}) {
    w.text(h);
  }
  for (const std::string& m : metrics) {
    for (const char* part : {".before", ".peak", ".after", ".peak_offset_ns", ".peak_source"}) {
      w.text(m + part);
    }
  }
  for (const std::string& c : counters) w.text("counter." + c);
  for (const std::string& l : labels) w.text("label." + l);
  w.end_record();

  for (const Run& run : runs) {
    const std::vector<int> depth = detail::step_depths(run);
    for (std::size_t i = 0; i < run.steps.size(); ++i) {
      const StepRecord& s = run.steps[i];
      w.text(run.id);
      w.integer(s.id);
      w.integer(s.parent_id);
      w.integer(depth[i]);
      w.text(s.name);
      w.text(to_string(s.kind));
      w.text(to_string(s.status));
      w.text(detail::step_inferred(s) ? "true" : "false");
      w.integer(s.thread);
      w.integer(s.start_offset_ns);
      w.integer(s.duration_ns);
      w.number(run.duration_ns > 0 ? 100.0 * static_cast<double>(s.duration_ns) /
                                         static_cast<double>(run.duration_ns)
                                   : kNaN);
      w.text(s.error_type);
      w.text(s.error_message);
      w.text(s.source);
      w.integer(static_cast<std::int64_t>(s.attempts.size()));
      std::string chain, used;
      for (const Attempt& a : s.attempts) {
        chain += (chain.empty() ? "" : " > ") + a.strategy + " (" +
                 std::string(to_string(a.outcome)) + ")";
        if (a.outcome == StepStatus::kOk) used = a.strategy;
      }
      w.text(chain);
      w.text(used);
      const IterationStats it = summarize_iterations(s.iteration_ns);
      w.integer(static_cast<std::int64_t>(it.count));
      w.text(it.count == 0 ? "" : detail::iterations_inferred(s) ? "true" : "false");
      for (double v : {it.iterations_per_second, it.first_ns, it.mean_ns, it.p50_ns, it.p95_ns}) {
        w.number(it.count > 0 ? v : kNaN);
      }
      for (const std::string& name : metrics) {
        const MetricFigures* m = s.metric(name);
        w.number(m ? m->before : kNaN);
        w.number(m ? m->peak : kNaN);
        w.number(m ? m->after : kNaN);
        if (m != nullptr && m->peak_offset_ns >= 0) {
          w.integer(m->peak_offset_ns);
        } else {
          w.text("");
        }
        w.text(m ? m->peak_source : "");
      }
      for (const std::string& c : counters) {
        const auto found = s.counters.find(c);
        w.number(found == s.counters.end() ? kNaN : found->second);
      }
      for (const std::string& l : labels) {
        const auto found = s.labels.find(l);
        w.text(found == s.labels.end() ? "" : found->second);
      }
      w.end_record();
    }
  }
  return out;
}

std::string render_series_csv(std::span<const Run> runs) {
  std::string out;
  CsvWriter w(out);
  for (const char* h : {"run_id", "offset_ns", "metric", "unit", "value"}) w.text(h);
  w.end_record();
  for (const Run& run : runs) {
    const TimeSeries& ts = run.series;
    const std::size_t width = ts.metrics.size();
    if (ts.values.size() != width * ts.size()) continue;  // malformed value: nothing to export
    // The constant fields of each record, quoted once: "run_id," and ",metric,unit,".
    std::string id;
    CsvWriter(id).text(run.id);
    id += ',';
    std::vector<std::string> middles(width);
    for (std::size_t m = 0; m < width; ++m) {
      CsvWriter mw(middles[m]);
      mw.text("");
      mw.text(ts.metrics[m]);
      mw.text(m < ts.units.size() ? to_string(ts.units[m]) : "");
      mw.text("");
    }
    for (std::size_t row = 0; row < ts.size(); ++row) {
      for (std::size_t m = 0; m < width; ++m) {
        out += id;
        append_int(out, ts.offset_ns[row]);
        out += middles[m];
        append_number(out, ts.values[row * width + m], "");
        out += "\r\n";
      }
    }
  }
  return out;
}

void write_csv_export(std::span<const Run> runs, const std::filesystem::path& dir) {
  // Both rendered before anything is written: running out of memory leaves no file (and no
  // new folder) behind.
  const std::string steps = render_steps_csv(runs);
  const std::string series = render_series_csv(runs);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("WriteFailed", dir.string() + ": cannot create the folder: " + ec.message());
  write_file_atomic(dir / "steps.csv", steps);
  write_file_atomic(dir / "series.csv", series);
}

}  // namespace genscope
