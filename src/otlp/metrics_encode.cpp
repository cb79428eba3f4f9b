// A finished run's figures as an OTLP ExportMetricsServiceRequest (docs/opentelemetry.md,
// "Metrics"). The families, names, labels and values are the Prometheus export's
// (MetricsModel::from_run, docs/metrics.md); this file only writes them as OTLP points:
// gauges as Gauge, counters as a cumulative monotonic Sum named as Prometheus names the
// sample ("<family>_total"), histograms as a cumulative Histogram with the same bounds.
//
// Field numbers from the OTLP specification (opentelemetry-proto metrics/v1, collector/metrics/v1):
//   ExportMetricsServiceRequest { repeated ResourceMetrics resource_metrics = 1; }
//   ResourceMetrics { Resource resource = 1; repeated ScopeMetrics scope_metrics = 2; }
//   ScopeMetrics { InstrumentationScope scope = 1; repeated Metric metrics = 2; }
//   Metric { string name = 1; string description = 2; string unit = 3; Gauge gauge = 5;
//            Sum sum = 7; Histogram histogram = 9; }
//   Gauge { repeated NumberDataPoint data_points = 1; }
//   Sum { repeated NumberDataPoint data_points = 1; AggregationTemporality
//         aggregation_temporality = 2; bool is_monotonic = 3; }   (CUMULATIVE = 2)
//   Histogram { repeated HistogramDataPoint data_points = 1; aggregation_temporality = 2; }
//   NumberDataPoint { fixed64 start_time_unix_nano = 2; fixed64 time_unix_nano = 3;
//                     double as_double = 4; repeated KeyValue attributes = 7; }
//   HistogramDataPoint { fixed64 start_time_unix_nano = 2; fixed64 time_unix_nano = 3;
//                        fixed64 count = 4; double sum = 5; repeated fixed64 bucket_counts = 6;
//                        repeated double explicit_bounds = 7; repeated KeyValue attributes = 9; }
#include <cmath>

#include "genscope/otlp.hpp"
#include "otlp/otlp_common.hpp"
#include "report/metrics_model.hpp"

namespace genscope {
namespace detail::otlp {
namespace {

constexpr std::uint32_t kRequestResourceMetrics = 1;
constexpr std::uint32_t kResourceMetricsResource = 1, kResourceMetricsScopeMetrics = 2;
constexpr std::uint32_t kScopeMetricsScope = 1, kScopeMetricsMetrics = 2;
constexpr std::uint32_t kMetricName = 1, kMetricDescription = 2, kMetricUnit = 3, kMetricGauge = 5,
                        kMetricSum = 7, kMetricHistogram = 9;
constexpr std::uint32_t kDataPoints = 1, kTemporality = 2, kMonotonic = 3;
constexpr std::uint64_t kCumulative = 2;
constexpr std::uint32_t kPointStart = 2, kPointTime = 3, kNumberAsDouble = 4, kNumberAttributes = 7;
constexpr std::uint32_t kHistCount = 4, kHistSum = 5, kHistBuckets = 6, kHistBounds = 7,
                        kHistAttributes = 9;

// OpenMetrics unit words as UCUM (what OTLP's Metric.unit holds).
std::string_view ucum(std::string_view unit) {
  if (unit == "bytes") return "By";
  if (unit == "seconds") return "s";
  if (unit == "ratio") return "1";
  if (unit == "celsius") return "Cel";
  if (unit == "watts") return "W";
  if (unit == "hertz") return "Hz";
  if (unit == "joules") return "J";
  return unit;
}

void labels(ProtobufWriter& p, std::uint32_t field, const LabelSet& set) {
  for (const auto& [key, value] : set) attribute(p, field, key, value);
}

void number_points(ProtobufWriter& g, const MetricFamily& family, std::uint64_t start,
                   std::uint64_t time) {
  for (const MetricPoint& point : family.points) {
    if (std::isnan(point.value)) continue;  // as the exposition: an unknown gauge is left out
    g.message(kDataPoints, [&](ProtobufWriter& p) {
      p.fixed64(kPointStart, start);
      p.fixed64(kPointTime, time);
      p.double_(kNumberAsDouble, point.value);
      labels(p, kNumberAttributes, point.labels);
    });
  }
}

void histogram_points(ProtobufWriter& h, const MetricFamily& family, std::uint64_t start,
                      std::uint64_t time) {
  for (const MetricPoint& point : family.points) {
    h.message(kDataPoints, [&](ProtobufWriter& p) {
      p.fixed64(kPointStart, start);
      p.fixed64(kPointTime, time);
      p.fixed64(kHistCount, point.count);
      p.double_(kHistSum, point.sum);
      std::vector<std::uint64_t> buckets;  // per bucket, not cumulative; the last is +Inf
      buckets.reserve(family.bounds.size() + 1);
      std::uint64_t below = 0;
      for (std::size_t i = 0; i < family.bounds.size(); ++i) {
        const std::uint64_t c = i < point.cumulative.size() ? point.cumulative[i] : below;
        buckets.push_back(c - std::min(c, below));
        below = std::max(below, c);
      }
      buckets.push_back(point.count - std::min(point.count, below));
      p.packed_fixed64(kHistBuckets, buckets);
      p.packed_double(kHistBounds, family.bounds);
      labels(p, kHistAttributes, point.labels);
    });
  }
}

bool has_points(const MetricFamily& family) {
  if (family.type != MetricType::kGauge) return !family.points.empty();
  for (const MetricPoint& p : family.points) {
    if (!std::isnan(p.value)) return true;
  }
  return false;
}

}  // namespace
}  // namespace detail::otlp

std::string encode_otlp_metrics(const Run& run, std::string_view service_name) {
  using namespace detail::otlp;
  using detail::MetricType;
  const std::uint64_t start = run_start_ns(run);
  const std::uint64_t time = run_end_ns(run);
  const std::vector<detail::MetricFamily> families =
      detail::MetricsModel::from_run(run).families(run.start_unix_ns + run.duration_ns);
  detail::ProtobufWriter w;
  w.message(kRequestResourceMetrics, [&](detail::ProtobufWriter& rm) {
    resource(rm, kResourceMetricsResource, run, service_name);
    rm.message(kResourceMetricsScopeMetrics, [&](detail::ProtobufWriter& sm) {
      scope(sm, kScopeMetricsScope, run);
      for (const detail::MetricFamily& family : families) {
        if (!has_points(family)) continue;
        sm.message(kScopeMetricsMetrics, [&](detail::ProtobufWriter& m) {
          string_field(m, kMetricName,
                       family.type == MetricType::kCounter ? family.name + "_total" : family.name);
          if (!family.help.empty()) string_field(m, kMetricDescription, family.help);
          if (!family.unit.empty()) string_field(m, kMetricUnit, ucum(family.unit));
          switch (family.type) {
            case MetricType::kGauge:
              m.message(kMetricGauge,
                        [&](detail::ProtobufWriter& g) { number_points(g, family, start, time); });
              break;
            case MetricType::kCounter:
              m.message(kMetricSum, [&](detail::ProtobufWriter& s) {
                number_points(s, family, start, time);
                s.varint(kTemporality, kCumulative);
                s.boolean(kMonotonic, true);
              });
              break;
            case MetricType::kHistogram:
              m.message(kMetricHistogram, [&](detail::ProtobufWriter& h) {
                histogram_points(h, family, start, time);
                h.varint(kTemporality, kCumulative);
              });
              break;
          }
        });
      }
    });
  });
  return w.take();
}

}  // namespace genscope
