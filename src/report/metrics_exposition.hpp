// Metric families and the one text writer for Prometheus 0.0.4 and OpenMetrics 1.0.0.
//
// The model (metrics_model.hpp) decides names, labels and values; this file only writes
// them down, following prometheus/docs content/docs/instrumenting/exposition_formats.md and
// OpenObservability/OpenMetrics specification/OpenMetrics.md:
//
//   # HELP genscope_steps_total Steps finished, by kind and status.     <- 0.0.4: HELP, TYPE
//   # TYPE genscope_steps_total counter                                    name the sample
//   genscope_steps_total{kind="sampling",status="ok"} 1
//
//   # TYPE genscope_steps counter                                       <- OpenMetrics: TYPE,
//   # HELP genscope_steps Steps finished, by kind and status.               UNIT, HELP name
//   genscope_steps_total{kind="sampling",status="ok"} 1                     the family
//   # EOF                                                                <- last line
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "genscope/metrics.hpp"

namespace genscope::detail {

enum class MetricType { kGauge, kCounter, kHistogram };

/// Label name and (unescaped) value pairs, in output order.
using LabelSet = std::vector<std::pair<std::string, std::string>>;

/// One labelled point of a family.
struct MetricPoint {
  LabelSet labels;
  double value = 0;  ///< Gauge or counter value.
  /// Histogram: cumulative count per bound of MetricFamily::bounds (+Inf is `count`).
  std::vector<std::uint64_t> cumulative;
  std::uint64_t count = 0;  ///< Histogram: observations.
  double sum = 0;           ///< Histogram: sum of observations.
};

/// A metric family: one name, one type, one HELP, its points.
struct MetricFamily {
  std::string name;  ///< Counters without the "_total" suffix the writer adds.
  MetricType type = MetricType::kGauge;
  std::string unit;  ///< OpenMetrics UNIT ("bytes", "seconds", ...); the name ends with "_<unit>".
  std::string help;
  std::vector<double> bounds;  ///< Histogram upper bounds, increasing, +Inf excluded.
  std::vector<MetricPoint> points;
};

/// Writes `families` in `format`. Families without points are left out; NaN gauges too.
std::string write_exposition(const std::vector<MetricFamily>& families, MetricsFormat format);

/// A number as Go's strconv.FormatFloat(v, 'g', -1, 64) writes it (what client_golang
/// writes): shortest round-trip digits, exponent form below 1e-4 and from 1e21, "NaN",
/// "+Inf", "-Inf".
std::string format_metric_number(double value);
/// An OpenMetrics canonical "le" value: format_metric_number plus ".0" when it has neither a
/// point nor an exponent ("1.0", "0.25", "1e+06", "+Inf").
std::string format_canonical_bound(double value);
/// A label value with `\`, `"` and newline escaped; invalid UTF-8 and CR become U+FFFD.
std::string escape_label_value(std::string_view value);
/// HELP text: `\` and newline escaped (and `"` for OpenMetrics); invalid UTF-8 and CR become
/// U+FFFD.
std::string escape_help(std::string_view help, MetricsFormat format);
/// True for a valid metric name [a-zA-Z_:][a-zA-Z0-9_:]*.
bool is_valid_metric_name(std::string_view name) noexcept;
/// True for a valid, non-reserved label name [a-zA-Z_][a-zA-Z0-9_]* not starting with "__".
bool is_valid_label_name(std::string_view name) noexcept;

}  // namespace genscope::detail
