// Derived figures of the Run value: deltas, cleanup effectiveness, iteration statistics.
#include "genscope/run.hpp"

#include <algorithm>
#include <cmath>

namespace genscope {

double MetricFigures::delta_percent() const noexcept {
  if (!(before != 0) || std::isnan(before) || std::isnan(after)) return kNaN;
  return (after - before) / before * 100.0;
}

double MetricFigures::cleanup_effectiveness() const noexcept {
  if (std::isnan(peak) || std::isnan(before) || std::isnan(after) || !(peak > before)) return kNaN;
  return std::clamp((peak - after) / (peak - before), 0.0, 1.0);
}

namespace {

double percentile(const std::vector<double>& sorted, double p) {
  // Linear interpolation between closest ranks (NumPy's default "linear" method).
  const double rank = p * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const auto hi = static_cast<std::size_t>(std::ceil(rank));
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - static_cast<double>(lo));
}

}  // namespace

IterationStats summarize_iterations(std::span<const std::int64_t> durations_ns) {
  IterationStats s;
  s.count = durations_ns.size();
  if (s.count == 0) return s;
  std::vector<double> sorted(durations_ns.begin(), durations_ns.end());
  double sum = 0;
  for (double d : sorted) sum += d;
  s.total_ns = sum;
  s.first_ns = sorted.front();
  s.mean_ns = sum / static_cast<double>(s.count);
  if (s.count > 1) s.mean_rest_ns = (sum - s.first_ns) / static_cast<double>(s.count - 1);
  double m2 = 0;
  for (double d : sorted) m2 += (d - s.mean_ns) * (d - s.mean_ns);
  s.stddev_ns = s.count > 1 ? std::sqrt(m2 / static_cast<double>(s.count - 1)) : 0.0;
  std::sort(sorted.begin(), sorted.end());
  s.min_ns = sorted.front();
  s.max_ns = sorted.back();
  s.p50_ns = percentile(sorted, 0.50);
  s.p95_ns = percentile(sorted, 0.95);
  s.iterations_per_second = sum > 0 ? static_cast<double>(s.count) / (sum * 1e-9) : kNaN;
  return s;
}

const MetricFigures* StepRecord::metric(std::string_view metric_name) const noexcept {
  for (const MetricFigures& m : metrics) {
    if (m.name == metric_name) return &m;
  }
  return nullptr;
}

double StepRecord::rate(std::string_view counter) const noexcept {
  const auto it = counters.find(std::string(counter));
  if (it == counters.end() || duration_ns <= 0) return kNaN;
  return it->second / (static_cast<double>(duration_ns) * 1e-9);
}

const StepRecord* Run::step(std::string_view step_name) const noexcept {
  for (const StepRecord& s : steps) {
    if (s.name == step_name) return &s;
  }
  return nullptr;
}

double Run::peak(std::string_view metric_name) const noexcept {
  double best = kNaN;
  for (const StepRecord& s : steps) {
    const MetricFigures* m = s.metric(metric_name);
    if (m != nullptr && !std::isnan(m->peak) && !(m->peak <= best)) best = m->peak;
  }
  return best;
}

}  // namespace genscope
