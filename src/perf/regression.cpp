// Regression detection: latest run(s) of each (pipeline, step) series against the median and
// MAD of the preceding baseline window. Regression when the robust z score exceeds
// z_threshold AND the relative slowdown exceeds min_effect (docs/history.md).
#include "genscope/regression.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "genscope/statistics.hpp"

namespace genscope {

std::vector<RegressionFinding> find_regressions(std::span<const Observation> observations,
                                                const RegressionOptions& options) {
  std::map<std::pair<std::string, std::string>, std::vector<const Observation*>> series;
  for (const auto& o : observations)
    if (options.pipeline.empty() || o.pipeline == options.pipeline)
      series[{o.pipeline, o.step}].push_back(&o);
  std::vector<RegressionFinding> findings;
  const std::size_t latest_n = std::max<std::size_t>(1, options.latest);
  for (auto& [key, list] : series) {
    std::stable_sort(list.begin(), list.end(), [](const Observation* a, const Observation* b) {
      return a->start_unix_ns < b->start_unix_ns;
    });
    if (list.size() < latest_n + options.min_baseline) continue;
    RegressionFinding f;
    f.pipeline = key.first;
    f.step = key.second;
    const std::size_t latest_begin = list.size() - latest_n;
    const std::size_t base_begin =
        latest_begin > options.window ? latest_begin - options.window : 0;
    std::vector<double> baseline, latest;
    for (std::size_t i = base_begin; i < latest_begin; ++i)
      baseline.push_back(list[i]->duration_ns);
    for (std::size_t i = latest_begin; i < list.size(); ++i) {
      latest.push_back(list[i]->duration_ns);
      f.latest_run_ids.push_back(list[i]->run_id);
    }
    f.baseline_runs = baseline.size();
    f.baseline_median_ns = median(baseline);
    f.baseline_mad_ns = median_absolute_deviation(baseline);
    f.latest_ns = median(latest);
    const double diff = f.latest_ns - f.baseline_median_ns;
    f.change_percent = f.baseline_median_ns > 0 ? 100 * diff / f.baseline_median_ns : 0;
    const double sigma = 1.4826 * f.baseline_mad_ns;
    f.z = sigma > 0 ? diff / sigma
          : diff == 0 ? 0
                      : std::copysign(std::numeric_limits<double>::infinity(), diff);
    f.regression = f.z > options.z_threshold && f.change_percent > 100 * options.min_effect;
    findings.push_back(std::move(f));
  }
  return findings;
}

nlohmann::json to_json(std::span<const RegressionFinding> findings) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& f : findings)
    out.push_back({{"pipeline", f.pipeline},
                   {"step", f.step},
                   {"latest_run_ids", f.latest_run_ids},
                   {"baseline_runs", f.baseline_runs},
                   {"baseline_median_ns", f.baseline_median_ns},
                   {"baseline_mad_ns", f.baseline_mad_ns},
                   {"latest_ns", f.latest_ns},
                   {"change_percent", f.change_percent},
                   {"z", std::isfinite(f.z) ? nlohmann::json(f.z) : nlohmann::json(f.z > 0 ? "inf" : "-inf")},
                   {"regression", f.regression}});
  return out;
}

}  // namespace genscope
