// Counters across pushes (see pushgateway_counters.hpp). The answer's layout, from
// prometheus/pushgateway api/v1/api.go: {"status": "success", "data": [{"labels": {grouping
// key}, "<metric name>": {"type": "COUNTER" | "HISTOGRAM" | ..., "metrics": [{"labels":
// {...}, "value": "3"} or {"labels", "buckets": {"<le>": "<count>"}, "count", "sum"}]}}]}.
#include "sinks/pushgateway_counters.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace genscope::detail {
namespace {

using nlohmann::json;

double number(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (end != s.c_str() && *end == '\0' && std::isfinite(d)) return d;
  }
  return 0;
}

// The point's labels without the grouping key (the gateway adds job, instance and, for a
// rank's run, rank to each).
LabelSet own_labels(const json& labels) {
  LabelSet out;
  if (!labels.is_object()) return out;
  for (const auto& [k, v] : labels.items()) {
    if (k == "job" || k == "instance" || k == "rank" || !v.is_string()) continue;
    out.emplace_back(k, v.get<std::string>());
  }
  std::sort(out.begin(), out.end());
  return out;
}

MetricPoint* find_point(MetricFamily& f, const LabelSet& sorted_labels) {
  for (MetricPoint& p : f.points) {
    LabelSet l = p.labels;
    std::sort(l.begin(), l.end());
    if (l == sorted_labels) return &p;
  }
  return nullptr;
}

void add_counter(MetricFamily& f, const json& metrics) {
  for (const json& m : metrics) {
    if (!m.is_object()) continue;
    const LabelSet labels = own_labels(m.value("labels", json::object()));
    const double old = number(m.value("value", json()));
    if (MetricPoint* p = find_point(f, labels)) {
      p->value += old;
    } else {
      f.points.push_back(MetricPoint{labels, old, {}, 0, 0});
    }
  }
}

void add_histogram(MetricFamily& f, const json& metrics) {
  for (const json& m : metrics) {
    if (!m.is_object()) continue;
    const LabelSet labels = own_labels(m.value("labels", json::object()));
    MetricPoint* p = find_point(f, labels);
    if (p == nullptr) {
      p = &f.points.emplace_back();
      p->labels = labels;
      p->cumulative.assign(f.bounds.size(), 0);
    }
    p->count += static_cast<std::uint64_t>(number(m.value("count", json())));
    p->sum += number(m.value("sum", json()));
    const json buckets = m.value("buckets", json::object());
    if (!buckets.is_object()) continue;
    // Cumulative counts by bound: a bound the answer lacks has the count of the highest
    // listed bound below it (what "cumulative" means), so the sum stays cumulative.
    std::vector<std::pair<double, double>> listed;
    for (const auto& [le, v] : buckets.items()) {
      listed.emplace_back(std::strtod(le.c_str(), nullptr), number(v));
    }
    std::sort(listed.begin(), listed.end());
    for (std::size_t i = 0; i < f.bounds.size() && i < p->cumulative.size(); ++i) {
      double old = 0;
      for (const auto& [bound, count] : listed) {
        if (bound <= f.bounds[i]) old = count;
      }
      p->cumulative[i] += static_cast<std::uint64_t>(old);
    }
  }
}

}  // namespace

void add_pushed_totals(std::vector<MetricFamily>& families, const json& api_answer,
                       std::string_view job, std::string_view instance, std::string_view rank) {
  if (!api_answer.is_object() || !api_answer.contains("data") || !api_answer["data"].is_array()) {
    return;
  }
  for (const json& group : api_answer["data"]) {
    if (!group.is_object()) continue;
    const json key = group.value("labels", json::object());
    if (!key.is_object() || key.value("job", "") != job || key.value("instance", "") != instance ||
        key.value("rank", "") != rank || key.size() != (rank.empty() ? 2u : 3u)) {
      continue;
    }
    for (MetricFamily& f : families) {
      if (f.type == MetricType::kGauge) continue;
      const std::string name = f.type == MetricType::kCounter ? f.name + "_total" : f.name;
      const auto found = group.find(name);
      if (found == group.end() || !found->is_object()) continue;
      const json metrics = found->value("metrics", json::array());
      if (!metrics.is_array()) continue;
      if (f.type == MetricType::kCounter) {
        add_counter(f, metrics);
      } else {
        add_histogram(f, metrics);
      }
    }
  }
}

}  // namespace genscope::detail
