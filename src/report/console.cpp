// The console report: header, one section per step (nested steps indented), summary,
// monitoring errors and notes — laid out like the seeds' analysis summaries.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "genscope/report.hpp"
#include "genscope/step_tree.hpp"
#include "report/console_style.hpp"
#include "report/memory_section.hpp"

namespace genscope {
namespace {

using detail::ConsoleStyle;

constexpr const char* kRule =
    "================================================================================\n";
constexpr const char* kThinRule =
    "--------------------------------------------------------------------------------\n";

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

void render_attempts(std::string& out, const StepRecord& step, const ConsoleStyle& s,
                     const std::string& in) {
  if (step.attempts.empty()) return;
  out += in + s.mark("🎯 ", "") + "STRATEGIES (fallback chain)\n";
  int n = 1;
  for (const Attempt& a : step.attempts) {
    out += in + "   " + std::to_string(n++) + ". " + s.status(a.outcome) + " " + a.strategy + " (" +
           s.duration(static_cast<double>(a.duration_ns)) + ")";
    if (!a.error.empty()) out += ": " + a.error;
    out += "\n";
  }
  for (auto it = step.attempts.rbegin(); it != step.attempts.rend(); ++it) {
    if (it->outcome == StepStatus::kOk) {
      out += in + "   strategy used: " + it->strategy + " (attempt " +
             std::to_string(step.attempts.rend() - it) + " of " +
             std::to_string(step.attempts.size()) + ")\n";
      break;
    }
  }
}

void render_iterations(std::string& out, const StepRecord& step, const ConsoleStyle& s,
                       const std::string& in) {
  if (step.iteration_ns.empty()) return;
  const IterationStats it = summarize_iterations(step.iteration_ns);
  out += in + s.mark("🔁 ", "") + "ITERATIONS: " + std::to_string(it.count) + ", " +
         fmt("%.2f it/s", it.iterations_per_second) +
         (step.iterations_inferred ? " (timings inferred from progress redraws)" : "") + "\n";
  out += in + "   first " + s.duration(it.first_ns);
  if (!std::isnan(it.mean_rest_ns) && it.mean_rest_ns > 0) {
    out += fmt(" (%.2fx the rest)", it.first_ns / it.mean_rest_ns);
  }
  out += ", mean " + s.duration(it.mean_ns) + ", p50 " + s.duration(it.p50_ns) + ", p95 " +
         s.duration(it.p95_ns) + ", stddev " + s.duration(it.stddev_ns) + "\n";
}

void render_counters(std::string& out, const StepRecord& step, const ConsoleStyle& s,
                     const std::string& in) {
  if (step.counters.empty()) return;
  out += in + s.mark("📊 ", "") + "WORK\n";
  for (const auto& [name, value] : step.counters) {
    const double rate = step.rate(name);
    const bool bytes = name == "bytes" || name.ends_with("_bytes");
    const std::string v = bytes ? format_bytes(value) : detail::format_count(value);
    const std::string r = bytes ? format_bytes(rate) + "/s"
                                : detail::format_short_count(rate) + " " + name + "/s";
    out += in + "   " + name + ": " + v + (std::isnan(rate) ? "" : "  (" + r + ")") + "\n";
  }
}

void render_step(std::string& out, const Run& run, const StepRecord& step, int depth,
                 const ConsoleStyle& s) {
  const std::string in(static_cast<std::size_t>(depth) * 4 + 4, ' ');
  const std::string head(static_cast<std::size_t>(depth) * 4, ' ');
  out += head + "[" + std::to_string(step.id + 1) + "] " + s.status(step.status) + " " +
         std::string(to_string(step.kind)) + s.mark(" · ", " - ") + step.name +
         (step.inferred ? " ~ (inferred)" : "") + "\n";
  out += in + s.mark("⏱️  ", "") + "Duration: " + s.duration(static_cast<double>(step.duration_ns)) +
         " (started at +" + s.duration(static_cast<double>(step.start_offset_ns)) + ")";
  if (step.thread != 0) out += ", thread " + std::to_string(step.thread);
  if (step.closed_by == kClosedRunEnd) {
    out += ", ended with the run";
  } else if (step.closed_by.rfind(kClosedInferredPrefix, 0) == 0) {
    out += ", end inferred (" + step.closed_by.substr(std::string_view(kClosedInferredPrefix).size()) + ")";
  }
  out += "\n";
  detail::render_memory(out, run, step, s, in);
  detail::render_efficiency(out, step, s, in);
  render_attempts(out, step, s, in);
  render_iterations(out, step, s, in);
  render_counters(out, step, s, in);
  if (!step.labels.empty()) {
    out += in + s.mark("🏷️  ", "") + "Labels:";
    for (const auto& [k, v] : step.labels) out += " " + k + "=" + v;
    out += "\n";
  }
  for (const Attachment& a : step.attachments) detail::render_attachment(out, a, s, in);
  if (step.status == StepStatus::kFailed || step.status == StepStatus::kSkipped) {
    out += in + s.mark("⚠️  ", "! ") + (step.status == StepStatus::kFailed ? "ERROR: " : "SKIPPED: ") +
           (step.error_type.empty() ? "" : step.error_type + ": ") + step.error_message + "\n";
  }
  for (const StepRecord& child : run.steps) {
    if (child.parent_id == step.id) render_step(out, run, child, depth + 1, s);
  }
}

bool has_error_from(const Run& run, const std::string& source) {
  return std::any_of(run.monitoring_errors.begin(), run.monitoring_errors.end(),
                     [&](const MonitoringError& e) { return e.source == source; });
}

void render_probes(std::string& out, const Run& run, const ConsoleStyle& s) {
  for (const GpuInfo& g : run.gpus) {
    out += "GPU " + std::to_string(g.index) + ": " + g.name + ", " + format_bytes(g.total_bytes) +
           ", driver " + g.driver_version + "\n";
  }
  const auto nvml = std::find_if(run.absent_probes.begin(), run.absent_probes.end(),
                                 [](const AbsentProbe& a) { return a.probe == "nvml"; });
  if (run.gpus.empty()) {
    if (nvml != run.absent_probes.end()) {
      out += std::string(s.mark("ℹ️  ", "")) + "GPU: none (" + nvml->reason + ")\n";
    } else if (has_error_from(run, "nvml")) {
      out += "GPU: none seen (the nvml probe failed: see MONITORING ERRORS)\n";
    } else {
      out += "GPU: none (no GPU probe in this run)\n";
    }
  }
  for (const AbsentProbe& a : run.absent_probes) {
    if (a.probe == "nvml" && run.gpus.empty()) continue;
    out += std::string(s.mark("ℹ️  ", "")) + "Probe " + a.probe + " absent: " + a.reason + "\n";
  }
  if (!run.probes.empty()) {
    out += "Probes:";
    for (std::size_t i = 0; i < run.probes.size(); ++i) out += (i ? ", " : " ") + run.probes[i];
    if (run.series.interval_ns > 0) {
      out += "; sampled " + format_cadence(run.series, s.plain) + " (" +
             detail::format_count(static_cast<double>(run.series.samples_taken)) + " samples)";
    }
    out += "\n";
  }
}

void render_header(std::string& out, const Run& run, const ConsoleStyle& s) {
  out += std::string(s.mark("🔍 ", "")) + "GENSCOPE RUN REPORT";
  if (!run.pipeline.name.empty()) out += ": " + run.pipeline.name;
  out += "\n" + std::string(kRule);
  out += "Run " + run.id + ", started " + run.start_utc + ", duration " +
         s.duration(static_cast<double>(run.duration_ns)) + ", genscope " + run.genscope_version +
         "\n";
  if (!run.pipeline.model.empty() || !run.pipeline.architecture.empty()) {
    out += "Model: " + (run.pipeline.model.empty() ? "-" : run.pipeline.model);
    if (!run.pipeline.architecture.empty()) out += " (" + run.pipeline.architecture + ")";
    out += "\n";
  }
  if (!run.pipeline.parameters.empty()) {
    out += "Parameters:";
    for (const auto& [k, v] : run.pipeline.parameters) out += " " + k + "=" + v;
    out += "\n";
  }
  out += "Host: " + run.host.hostname + ", " + run.host.cpu_model + ", " +
         std::to_string(run.host.cpu_cores) + " cores, " + format_bytes(run.host.ram_bytes) +
         " RAM\n";
  if (run.distributed) out += "Distributed: " + describe(*run.distributed) + "\n";
  render_probes(out, run, s);
  if (!run.labels.empty()) {
    out += "Labels:";
    for (const auto& [k, v] : run.labels) out += " " + k + "=" + v;
    out += "\n";
  }
}

void render_run_peaks(std::string& out, const Run& run, const ConsoleStyle& s) {
  std::vector<std::string> seen;
  for (const StepRecord& st : run.steps) {
    for (const MetricFigures& m : st.metrics) {
      if (m.unit != Unit::kBytes || detail::is_constant_metric(m.name)) continue;
      if (detail::is_headroom_metric(m.name)) continue;
      if (std::find(seen.begin(), seen.end(), m.name) != seen.end()) continue;
      seen.push_back(m.name);
      const StepRecord* best = nullptr;
      const MetricFigures* best_m = nullptr;
      double peak = kNaN;
      for (const StepRecord& other : run.steps) {
        const MetricFigures* o = other.metric(m.name);
        if (o != nullptr && !std::isnan(o->peak) && !(o->peak <= peak)) {
          peak = o->peak;
          best = &other;
          best_m = o;
        }
      }
      if (best == nullptr) continue;
      out += "   Peak " + detail::metric_label(m.name) + ": " + format_bytes(peak) + " in " +
             best->name;
      const detail::PeakTime at = detail::peak_run_time(run, *best, *best_m);
      if (at.offset_ns >= 0) {
        out += " at +" + s.duration(static_cast<double>(at.offset_ns)) +
               (at.sampled ? " (time sampled)" : "");
      }
      out += "\n";
    }
  }
}

void render_summary(std::string& out, const Run& run, const ConsoleStyle& s) {
  out += kRule;
  out += std::string(s.mark("📋 ", "")) + "SUMMARY\n";
  std::map<StepStatus, int> counts;
  for (const StepRecord& st : run.steps) ++counts[st.status];
  // Each moment once: overlapping top-level steps (threads) are not added twice.
  const StepTimeSummary time = summarize_step_time(run);
  out += "   Steps: " + std::to_string(run.steps.size()) + " (" +
         std::to_string(counts[StepStatus::kOk]) + " ok, " +
         std::to_string(counts[StepStatus::kFailed]) + " failed, " +
         std::to_string(counts[StepStatus::kSkipped]) + " skipped)\n";
  out += "   Total time: " + s.duration(static_cast<double>(run.duration_ns)) +
         " (top-level steps " + s.duration(static_cast<double>(time.top_level_ns)) +
         ", unattributed " + s.duration(static_cast<double>(time.unattributed_ns)) + ")\n";
  // Each top-level step's share and each kind's, as (name, "duration (share)").
  using Share = std::pair<std::string, std::string>;
  std::vector<Share> top_level;
  for (const StepRecord& st : run.steps) {
    if (st.parent_id >= 0 || run.duration_ns <= 0) continue;
    top_level.emplace_back(st.name + (st.inferred ? " ~" : ""),
                           s.duration(static_cast<double>(st.duration_ns)) +
                               fmt(" (%.1f%%)", 100.0 * static_cast<double>(st.duration_ns) /
                                                    static_cast<double>(run.duration_ns)));
  }
  std::vector<Share> by_kind;
  if (time.run_ns > 0) {
    for (const auto& [kind, ns] : time.by_kind_ns) {
      const double share = 100.0 * static_cast<double>(ns) / static_cast<double>(time.run_ns);
      by_kind.emplace_back(to_string(kind),
                           s.duration(static_cast<double>(ns)) + fmt(" (%.1f%%)", share));
    }
  }
  if (!by_kind.empty()) {
    // Where the time went, each moment counted once for the innermost step covering it.
    out += "   By kind (innermost step):";
    for (const auto& [kind, share] : by_kind) out += " " + kind + " " + share;
    out += "\n";
    std::vector<std::pair<std::int64_t, std::int64_t>> gaps = time.gaps;
    std::sort(gaps.begin(), gaps.end(), [](const auto& a, const auto& b) {
      return a.second - a.first > b.second - b.first;
    });
    std::string listed;
    for (std::size_t i = 0; i < gaps.size() && i < 5; ++i) {
      if (gaps[i].second - gaps[i].first < time.run_ns / 100) break;
      listed += " +" + s.duration(static_cast<double>(gaps[i].first)) + "..+" +
                s.duration(static_cast<double>(gaps[i].second));
    }
    if (!listed.empty()) out += "   Unattributed (no step):" + listed + "\n";
    if (time.inferred_ns > 0) {
      out += "   Inferred: " + s.duration(static_cast<double>(time.inferred_ns)) +
             " in steps no line announced (marked ~)\n";
    }
  }
  // The top-level steps' shares, unless they are one step per kind, named after it: then the
  // list would only repeat the "By kind" line.
  std::vector<Share> sorted_top = top_level;
  std::sort(sorted_top.begin(), sorted_top.end());
  std::sort(by_kind.begin(), by_kind.end());
  if (sorted_top != by_kind) {
    for (const auto& [name, share] : top_level) out += "     " + name + ": " + share + "\n";
  }
  render_run_peaks(out, run, s);
  for (const Attachment& a : run.attachments) detail::render_attachment(out, a, s, "   ");
  if (!run.monitoring_errors.empty()) {
    out += std::string(s.mark("⚠️  ", "")) + "MONITORING ERRORS (the pipeline was not affected)\n";
    for (const MonitoringError& e : run.monitoring_errors) {
      out += "   [" + e.source + "] " + e.message;
      if (!e.step.empty()) out += " (in " + e.step + ")";
      out += "\n";
    }
  }
  if (!run.notes.empty()) {
    out += "Notes:\n";
    for (const std::string& n : run.notes) out += "   " + n + "\n";
  }
}

}  // namespace

std::string render_attachment(const Attachment& attachment, const ConsoleOptions& options) {
  std::string out;
  detail::render_attachment(out, attachment, ConsoleStyle{options.plain, options.verbose}, "");
  return out;
}

std::string render_console(const Run& run, const ConsoleOptions& options) {
  const ConsoleStyle style{options.plain, options.verbose};
  std::string out;
  render_header(out, run, style);
  for (const StepRecord& step : run.steps) {
    if (step.parent_id >= 0) continue;
    out += kThinRule;
    render_step(out, run, step, 0, style);
  }
  render_summary(out, run, style);
  if (options.series && run.series.size() > 0) {
    out += "Time series: " + std::to_string(run.series.size()) + " stored samples of " +
           std::to_string(run.series.samples_taken) + " taken, " +
           format_cadence(run.series, style.plain) + "\n";
  }
  out += kRule;
  return out;
}

}  // namespace genscope
