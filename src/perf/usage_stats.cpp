// UsageTracker: usage statistics across generations (seed 003).
#include "genscope/usage_stats.hpp"

#include <algorithm>
#include <cmath>

#include "perf/perf_internal.hpp"

namespace genscope {

void UsageTracker::record_initialization(std::int64_t duration_ns) {
  std::lock_guard lock(mutex_);
  stats_.initialization_ns += duration_ns;
}

void UsageTracker::record_generation(std::int64_t duration_ns, double peak_memory_bytes,
                                     double current_memory_bytes) {
  std::lock_guard lock(mutex_);
  stats_.generations += 1;
  stats_.total_inference_ns += duration_ns;
  stats_.average_inference_ns =
      static_cast<double>(stats_.total_inference_ns) / static_cast<double>(stats_.generations);
  if (!std::isnan(peak_memory_bytes) &&
      (std::isnan(stats_.peak_memory_bytes) || peak_memory_bytes > stats_.peak_memory_bytes))
    stats_.peak_memory_bytes = peak_memory_bytes;
  if (!std::isnan(current_memory_bytes)) stats_.current_memory_bytes = current_memory_bytes;
}

void UsageTracker::record_run(const Run& run) {
  std::int64_t loading_ns = 0;
  double peak = kNaN, current = kNaN;
  const StepRecord* last = nullptr;
  for (const auto& s : run.steps) {
    if (s.parent_id >= 0) continue;
    if (s.kind == StepKind::kModelLoading) loading_ns += s.duration_ns;
    const double p = detail::step_memory_peak(s);
    if (!std::isnan(p) && (std::isnan(peak) || p > peak)) peak = p;
    last = &s;
  }
  if (last != nullptr) {
    double after = kNaN;
    for (const auto& m : last->metrics)
      if (m.name.rfind("gpu", 0) == 0 && m.name.find(".used_bytes") != std::string::npos)
        after = std::isnan(after) ? m.after : std::max(after, m.after);
    if (std::isnan(after))
      for (const auto& m : last->metrics)
        if (detail::is_program_rss(m.name)) after = m.after;
    current = after;
  }
  if (loading_ns > 0) record_initialization(loading_ns);
  record_generation(run.duration_ns - loading_ns, peak, current);
  if (!run.gpus.empty()) set_device(run.gpus.front().name);
}

void UsageTracker::set_device(std::string device) {
  std::lock_guard lock(mutex_);
  stats_.device = std::move(device);
}

UsageStats UsageTracker::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

nlohmann::json UsageTracker::to_json() const {
  const UsageStats s = stats();
  return {{"initialization_seconds", static_cast<double>(s.initialization_ns) / 1e9},
          {"generations", s.generations},
          {"average_inference_seconds", s.average_inference_ns / 1e9},
          {"total_inference_seconds", static_cast<double>(s.total_inference_ns) / 1e9},
          {"peak_memory_bytes", s.peak_memory_bytes},
          {"current_memory_bytes", s.current_memory_bytes},
          {"device", s.device}};
}

}  // namespace genscope
