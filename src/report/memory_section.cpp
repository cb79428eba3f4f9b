// The per-step memory and device sections of the console report: each figure as
// before -> peak (when, how) -> after, with the change; GPU device figures (utilisation,
// temperature, power, clocks) in their own block per GPU; seed 001's efficiency ratios.
//
// The time of a peak: exact peaks read from a high-water mark (VmHWM) carry no time. When the
// run's sampled series has samples inside the step, the report gives the time of the highest
// of them and says it is sampled; only a step with no sample at all has no time.
#include "report/memory_section.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "report/export_util.hpp"

namespace genscope::detail {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string percent_text(const char* format, double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// A device figure of an NVML GPU (utilisation, temperature, ...): not a memory figure.
bool is_gpu_device_metric(const MetricFigures& m) {
  return m.name.rfind("gpu", 0) == 0 && m.unit != Unit::kBytes;
}

// Shown only with --verbose: constants and figures another line already carries.
bool is_redundant_metric(const MetricFigures& m) {
  return is_constant_metric(m.name) || m.name == "system.used_percent";
}

using Labelled = std::vector<std::pair<std::string, const MetricFigures*>>;

std::size_t label_width(const Labelled& ms) {
  std::size_t w = 0;
  for (const auto& [label, m] : ms) w = std::max(w, label.size());
  return w;
}

std::string padded(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

std::string figure_line(const Run& run, const StepRecord& step, const std::string& label,
                        const MetricFigures& m, const ConsoleStyle& s, std::size_t width) {
  const std::string arrow = std::string(" ") + s.arrow() + " ";
  std::string line = padded(label, width) + "  " +
                     format_value(m.before, m.unit, false, s.plain) + arrow;
  // A peak of free or available memory means nothing: those show as before -> after.
  if (!is_headroom_metric(m.name)) {
    line += format_value(m.peak, m.unit, false, s.plain);
    const std::string when = peak_time_text(run, step, m, s);
    if (!when.empty()) line += " (" + when + ")";
    line += arrow;
  }
  line += format_value(m.after, m.unit, false, s.plain);
  if (!std::isnan(m.delta())) {
    line += "   change " + format_value(m.delta(), m.unit, true, s.plain);
    if (m.unit == Unit::kBytes && !std::isnan(m.delta_percent())) {
      line += percent_text(" (%+.1f%%)", m.delta_percent());
    }
  }
  return line;
}

bool has_figures(const MetricFigures& m) {
  return !(std::isnan(m.before) && std::isnan(m.after) && std::isnan(m.peak));
}

}  // namespace

bool is_headroom_metric(const std::string& name) {
  return name.find("available") != std::string::npos || name.find("free") != std::string::npos;
}

bool is_constant_metric(const std::string& name) { return ends_with(name, ".total_bytes"); }

std::string offset_text(std::int64_t offset_ns, std::int64_t duration_ns, const ConsoleStyle& s) {
  if (offset_ns <= 0) return "at start";
  if (offset_ns >= duration_ns) return "at end";
  return "at " + s.duration(static_cast<double>(offset_ns));
}

SampledPeak highest_sample(const Run& run, const std::string& metric, std::int64_t from_ns,
                           std::int64_t to_ns) {
  SampledPeak best;
  const TimeSeries& t = run.series;
  const auto column = std::find(t.metrics.begin(), t.metrics.end(), metric);
  if (column == t.metrics.end()) return best;
  const std::size_t c = static_cast<std::size_t>(column - t.metrics.begin());
  if (t.values.size() < t.size() * t.metrics.size()) return best;  // a malformed series
  auto row = std::lower_bound(t.offset_ns.begin(), t.offset_ns.end(), from_ns);
  for (; row != t.offset_ns.end() && *row <= to_ns; ++row) {
    const double v = t.at(static_cast<std::size_t>(row - t.offset_ns.begin()), c);
    if (std::isnan(v) || (best.found && !(v > best.value))) continue;
    best = {true, *row, v};
  }
  return best;
}

PeakTime peak_run_time(const Run& run, const StepRecord& step, const MetricFigures& m) {
  if (m.peak_offset_ns >= 0) return {add_saturated(step.start_offset_ns, m.peak_offset_ns), false};
  const SampledPeak h = highest_sample(
      run, m.name, step.start_offset_ns,
      add_saturated(step.start_offset_ns, std::max<std::int64_t>(step.duration_ns, 0)));
  return h.found ? PeakTime{h.offset_ns, true} : PeakTime{};
}

std::string peak_time_text(const Run& run, const StepRecord& step, const MetricFigures& m,
                           const ConsoleStyle& s) {
  if (std::isnan(m.peak)) return {};
  if (m.peak_offset_ns >= 0) {
    std::string t = offset_text(m.peak_offset_ns, step.duration_ns, s);
    return m.peak_source.empty() ? t : t + ", " + m.peak_source;
  }
  const std::string source = m.peak_source.empty() ? "peak" : m.peak_source;
  const SampledPeak h =
      highest_sample(run, m.name, step.start_offset_ns, step.start_offset_ns + step.duration_ns);
  if (!h.found) {
    return source + "; no sample inside the step, so no time";
  }
  const std::string at = offset_text(h.offset_ns - step.start_offset_ns, step.duration_ns, s);
  if (h.value >= m.peak) return source + "; time sampled: " + at;
  return source + "; time sampled: highest sample " + format_value(h.value, m.unit, false, s.plain) +
         " " + at;
}

void render_memory(std::string& out, const Run& run, const StepRecord& step, const ConsoleStyle& s,
                   const std::string& in) {
  Labelled memory;
  std::map<std::string, Labelled> gpus;  // "gpu0" -> figures
  for (const MetricFigures& m : step.metrics) {
    if (!has_figures(m) || (!s.verbose && is_redundant_metric(m))) continue;
    std::string label = metric_label(m.name);
    if (is_gpu_device_metric(m)) {
      const std::string gpu = m.name.substr(0, m.name.find('.'));
      const std::string prefix = "GPU " + gpu.substr(3) + " ";  // the block's title says it
      if (label.rfind(prefix, 0) == 0) label.erase(0, prefix.size());
      gpus[gpu].emplace_back(std::move(label), &m);
    } else {
      memory.emplace_back(std::move(label), &m);
    }
  }
  if (!memory.empty()) {
    out += in + s.mark("💾 ", "") + "MEMORY (before " + s.arrow() + " peak " + s.arrow() +
           " after)\n";
    const std::size_t w = label_width(memory);
    for (const auto& [label, m] : memory) {
      out += in + "   " + figure_line(run, step, label, *m, s, w) + "\n";
    }
  }
  for (const auto& [gpu, figures] : gpus) {
    out += in + s.mark("🎮 ", "") + "GPU " + gpu.substr(3) + " (before " + s.arrow() + " peak " +
           s.arrow() + " after)\n";
    const std::size_t w = label_width(figures);
    for (const auto& [label, m] : figures) {
      out += in + "   " + figure_line(run, step, label, *m, s, w) + "\n";
    }
  }
}

void render_efficiency(std::string& out, const StepRecord& step, const ConsoleStyle& s,
                       const std::string& in) {
  std::vector<std::string> parts;
  for (const MetricFigures& m : step.metrics) {
    const std::string suffix = ".allocated_bytes";
    if (ends_with(m.name, suffix) && m.name.size() > suffix.size()) {
      const MetricFigures* r =
          step.metric(m.name.substr(0, m.name.size() - suffix.size()) + ".reserved_bytes");
      if (r != nullptr && r->after > 0 && !std::isnan(m.after)) {
        parts.push_back("allocated/reserved " + percent_text("%.1f%%", m.after / r->after * 100.0) +
                        " (" + metric_label(m.name) + ")");
      }
    }
    const double c = m.cleanup_effectiveness();
    // Cleanup is about what this process allocated: system-wide figures move with others.
    if (!std::isnan(c) && m.unit == Unit::kBytes && !is_constant_metric(m.name) &&
        !is_headroom_metric(m.name) && m.name.rfind("system.", 0) != 0) {
      parts.push_back("cleanup " + percent_text("%.0f%%", c * 100.0) + " of the " +
                      metric_label(m.name) + " rise");
    }
  }
  if (parts.empty()) return;
  out += in + s.mark("♻️  ", "") + "EFFICIENCY\n";
  for (const std::string& p : parts) out += in + "   " + p + "\n";
}

}  // namespace genscope::detail
