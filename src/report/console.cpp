// The console report: header, one section per step (nested steps indented), summary,
// monitoring errors and notes — laid out like the seeds' analysis summaries.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "genscope/report.hpp"
#include "report/console_style.hpp"

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

std::string offset(double ns, const ConsoleStyle& s) {
  return ns < 0 ? std::string("time unknown") : "at " + format_duration(ns, s.plain);
}

bool is_headroom_metric(const std::string& name) {
  return name.find("available") != std::string::npos || name.find("free") != std::string::npos;
}

bool is_constant_metric(const std::string& name) {
  return name.size() >= 12 && name.compare(name.size() - 12, 12, ".total_bytes") == 0;
}

void render_metrics(std::string& out, const StepRecord& step, const ConsoleStyle& s,
                    const std::string& in) {
  bool any = false;
  for (const MetricFigures& m : step.metrics) {
    if (is_constant_metric(m.name)) continue;
    if (std::isnan(m.before) && std::isnan(m.after) && std::isnan(m.peak)) continue;
    if (!any) {
      out += in + s.mark("💾 ", "") + "MEMORY AND DEVICES (before -> peak -> after)\n";
      any = true;
    }
    std::string line = in + "   " + detail::metric_label(m.name) + ": " +
                       detail::format_value(m.before, m.unit) + " -> ";
    // A peak of free or available memory means nothing: show those as before -> after.
    if (!is_headroom_metric(m.name)) {
      line += detail::format_value(m.peak, m.unit) + " (" +
              offset(static_cast<double>(m.peak_offset_ns), s) +
              (m.peak_source.empty() ? "" : ", " + m.peak_source) + ") -> ";
    }
    line += detail::format_value(m.after, m.unit);
    if (!std::isnan(m.delta())) {
      line += "   change " + detail::format_value(m.delta(), m.unit, true);
      if (m.unit == Unit::kBytes && !std::isnan(m.delta_percent())) {
        line += fmt(" (%+.1f%%)", m.delta_percent());
      }
    }
    out += line + "\n";
  }
}

void render_efficiency(std::string& out, const StepRecord& step, const ConsoleStyle& s,
                       const std::string& in) {
  std::vector<std::string> parts;
  for (const MetricFigures& m : step.metrics) {
    const std::string suffix = ".allocated_bytes";
    if (m.name.size() > suffix.size() &&
        m.name.compare(m.name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      const MetricFigures* r =
          step.metric(m.name.substr(0, m.name.size() - suffix.size()) + ".reserved_bytes");
      if (r != nullptr && r->after > 0 && !std::isnan(m.after)) {
        parts.push_back("allocated/reserved " + fmt("%.1f%%", m.after / r->after * 100.0) +
                        " (" + detail::metric_label(m.name) + ")");
      }
    }
    const double c = m.cleanup_effectiveness();
    // Cleanup is about what this process allocated: system-wide figures move with others.
    if (!std::isnan(c) && m.unit == Unit::kBytes && !is_constant_metric(m.name) &&
        !is_headroom_metric(m.name) && m.name.rfind("system.", 0) != 0) {
      parts.push_back("cleanup " + fmt("%.0f%%", c * 100.0) + " of the " +
                      detail::metric_label(m.name) + " rise");
    }
  }
  if (parts.empty()) return;
  out += in + s.mark("♻️  ", "") + "EFFICIENCY\n";
  for (const std::string& p : parts) out += in + "   " + p + "\n";
}

void render_attempts(std::string& out, const StepRecord& step, const ConsoleStyle& s,
                     const std::string& in) {
  if (step.attempts.empty()) return;
  out += in + s.mark("🎯 ", "") + "STRATEGIES (fallback chain)\n";
  int n = 1;
  for (const Attempt& a : step.attempts) {
    out += in + "   " + std::to_string(n++) + ". " + s.status(a.outcome) + " " + a.strategy + " (" +
           format_duration(static_cast<double>(a.duration_ns), s.plain) + ")";
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
  out += in + "   first " + format_duration(it.first_ns, s.plain);
  if (!std::isnan(it.mean_rest_ns) && it.mean_rest_ns > 0) {
    out += fmt(" (%.2fx the rest)", it.first_ns / it.mean_rest_ns);
  }
  out += ", mean " + format_duration(it.mean_ns, s.plain) + ", p50 " +
         format_duration(it.p50_ns, s.plain) + ", p95 " + format_duration(it.p95_ns, s.plain) +
         ", stddev " + format_duration(it.stddev_ns, s.plain) + "\n";
}

std::string count_text(double v) {
  if (std::isnan(v)) return "n/a";
  const double a = std::fabs(v);
  if (a >= 1e9) return fmt("%.2fG", v / 1e9);
  if (a >= 1e6) return fmt("%.2fM", v / 1e6);
  if (a >= 1e4) return fmt("%.1fk", v / 1e3);
  return fmt(v == std::floor(v) ? "%.0f" : "%.1f", v);
}

void render_counters(std::string& out, const StepRecord& step, const ConsoleStyle& s,
                     const std::string& in) {
  if (step.counters.empty()) return;
  out += in + s.mark("📊 ", "") + "WORK\n";
  for (const auto& [name, value] : step.counters) {
    const double rate = step.rate(name);
    const bool bytes = name == "bytes" || name.ends_with("_bytes");
    const std::string v = bytes ? format_bytes(value) : count_text(value);
    const std::string r = bytes ? format_bytes(rate) + "/s" : count_text(rate) + " " + name + "/s";
    out += in + "   " + name + ": " + v + (std::isnan(rate) ? "" : "  (" + r + ")") + "\n";
  }
}

void render_step(std::string& out, const Run& run, const StepRecord& step, int depth,
                 const ConsoleStyle& s) {
  const std::string in(static_cast<std::size_t>(depth) * 4 + 4, ' ');
  const std::string head(static_cast<std::size_t>(depth) * 4, ' ');
  out += head + "[" + std::to_string(step.id + 1) + "] " + s.status(step.status) + " " +
         std::string(to_string(step.kind)) + s.mark(" · ", " - ") + step.name + "\n";
  out += in + s.mark("⏱️  ", "") + "Duration: " +
         format_duration(static_cast<double>(step.duration_ns), s.plain) + " (started at +" +
         format_duration(static_cast<double>(step.start_offset_ns), s.plain) + ")";
  if (step.thread != 0) out += ", thread " + std::to_string(step.thread);
  out += "\n";
  render_metrics(out, step, s, in);
  render_efficiency(out, step, s, in);
  render_attempts(out, step, s, in);
  render_iterations(out, step, s, in);
  render_counters(out, step, s, in);
  for (const auto& [k, v] : step.labels) out += in + k + ": " + v + "\n";
  for (const Attachment& a : step.attachments) detail::render_attachment(out, a, s, in);
  if (step.status == StepStatus::kFailed || step.status == StepStatus::kSkipped) {
    out += in + s.mark("⚠️  ", "! ") + (step.status == StepStatus::kFailed ? "ERROR: " : "SKIPPED: ") +
           (step.error_type.empty() ? "" : step.error_type + ": ") + step.error_message + "\n";
  }
  for (const StepRecord& child : run.steps) {
    if (child.parent_id == step.id) render_step(out, run, child, depth + 1, s);
  }
}

void render_header(std::string& out, const Run& run, const ConsoleStyle& s) {
  out += std::string(s.mark("🔍 ", "")) + "GENSCOPE RUN REPORT";
  if (!run.pipeline.name.empty()) out += ": " + run.pipeline.name;
  out += "\n" + std::string(kRule);
  out += "Run " + run.id + ", started " + run.start_utc + ", duration " +
         format_duration(static_cast<double>(run.duration_ns), s.plain) + ", genscope " +
         run.genscope_version + "\n";
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
  for (const GpuInfo& g : run.gpus) {
    out += "GPU " + std::to_string(g.index) + ": " + g.name + ", " + format_bytes(g.total_bytes) +
           ", driver " + g.driver_version + "\n";
  }
  if (run.gpus.empty()) out += "GPU: none seen (NVML not available)\n";
  if (!run.labels.empty()) {
    out += "Labels:";
    for (const auto& [k, v] : run.labels) out += " " + k + "=" + v;
    out += "\n";
  }
}

void render_summary(std::string& out, const Run& run, const ConsoleStyle& s) {
  out += kRule;
  out += std::string(s.mark("📋 ", "")) + "SUMMARY\n";
  std::map<StepStatus, int> counts;
  std::int64_t top_total = 0;
  for (const StepRecord& st : run.steps) {
    ++counts[st.status];
    if (st.parent_id < 0) top_total += st.duration_ns;
  }
  out += "   Steps: " + std::to_string(run.steps.size()) + " (" +
         std::to_string(counts[StepStatus::kOk]) + " ok, " +
         std::to_string(counts[StepStatus::kFailed]) + " failed, " +
         std::to_string(counts[StepStatus::kSkipped]) + " skipped)\n";
  out += "   Total time: " + format_duration(static_cast<double>(run.duration_ns), s.plain) +
         " (top-level steps " + format_duration(static_cast<double>(top_total), s.plain) + ")\n";
  for (const StepRecord& st : run.steps) {
    if (st.parent_id >= 0 || run.duration_ns <= 0) continue;
    out += "     " + st.name + ": " + format_duration(static_cast<double>(st.duration_ns), s.plain) +
           fmt(" (%.1f%%)", 100.0 * static_cast<double>(st.duration_ns) /
                                static_cast<double>(run.duration_ns)) +
           "\n";
  }
  // Peak of each byte metric over the run, with the step where it happened.
  std::vector<std::string> seen;
  for (const StepRecord& st : run.steps) {
    for (const MetricFigures& m : st.metrics) {
      if (m.unit != Unit::kBytes || is_constant_metric(m.name)) continue;
      if (is_headroom_metric(m.name)) continue;
      if (std::find(seen.begin(), seen.end(), m.name) != seen.end()) continue;
      seen.push_back(m.name);
      const StepRecord* best = nullptr;
      double peak = kNaN;
      for (const StepRecord& other : run.steps) {
        const MetricFigures* o = other.metric(m.name);
        if (o != nullptr && !std::isnan(o->peak) && !(o->peak <= peak)) {
          peak = o->peak;
          best = &other;
        }
      }
      if (best != nullptr) {
        out += "   Peak " + detail::metric_label(m.name) + ": " + format_bytes(peak) + " in " +
               best->name + "\n";
      }
    }
  }
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
  detail::render_attachment(out, attachment, ConsoleStyle{options.plain}, "");
  return out;
}

std::string render_console(const Run& run, const ConsoleOptions& options) {
  ConsoleStyle style{options.plain};
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
           std::to_string(run.series.samples_taken) + " taken, interval " +
           format_duration(static_cast<double>(run.series.interval_ns), options.plain) + "\n";
  }
  out += kRule;
  return out;
}

}  // namespace genscope
