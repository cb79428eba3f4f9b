// The console report's per-step memory, GPU and efficiency blocks (private to src/report).
#pragma once

#include <cstdint>
#include <string>

#include "report/console_style.hpp"

namespace genscope::detail {

/// The highest sample of one metric in a time window of the run's series.
struct SampledPeak {
  bool found = false;
  std::int64_t offset_ns = 0;  ///< From the run start.
  double value = 0;
};

/// Free or available memory: its peak means nothing (shown as before -> after).
bool is_headroom_metric(const std::string& name);
/// A figure that does not change during a run (total memory).
bool is_constant_metric(const std::string& name);

/// The highest sample of `metric` with from_ns <= offset <= to_ns (run-relative).
SampledPeak highest_sample(const Run& run, const std::string& metric, std::int64_t from_ns,
                           std::int64_t to_ns);
/// When, from the run start, a step's peak of `m` happened: its recorded time, else (an exact
/// high-water mark without a time of its own) the time of the highest sample inside the step.
struct PeakTime {
  std::int64_t offset_ns = -1;  ///< -1: neither is known.
  bool sampled = false;         ///< The time is the highest sample's.
};
PeakTime peak_run_time(const Run& run, const StepRecord& step, const MetricFigures& m);

/// "at start", "at end" or "at 12.30 ms" for an offset inside a step.
std::string offset_text(std::int64_t offset_ns, std::int64_t duration_ns, const ConsoleStyle& s);
/// When and how a step's peak was seen: "at 12.30 ms, exact", or for an exact peak without
/// a time "exact; time sampled: at 12.30 ms" from the series.
std::string peak_time_text(const Run& run, const StepRecord& step, const MetricFigures& m,
                           const ConsoleStyle& s);

/// MEMORY (before -> peak -> after) and one GPU block per NVML device.
void render_memory(std::string& out, const Run& run, const StepRecord& step, const ConsoleStyle& s,
                   const std::string& indent);
/// Seed 001's allocated/reserved and cleanup ratios.
void render_efficiency(std::string& out, const StepRecord& step, const ConsoleStyle& s,
                       const std::string& indent);

}  // namespace genscope::detail
