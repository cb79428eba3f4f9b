// Metric kinds and series look-ups shared by the exports (see series_queries.hpp).
#include "report/series_queries.hpp"

#include <algorithm>
#include <cmath>

namespace genscope::detail {

bool is_headroom_metric(const std::string& name) {
  return name.find("available") != std::string::npos || name.find("free") != std::string::npos;
}

bool is_constant_metric(const std::string& name) {
  return name.size() >= 12 && name.compare(name.size() - 12, 12, ".total_bytes") == 0;
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

}  // namespace genscope::detail
