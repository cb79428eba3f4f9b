// Private helpers shared by the perf sources.
#include "perf/perf_internal.hpp"

#include <algorithm>
#include <cmath>

namespace genscope::detail {
namespace {

double fmax_nan(double a, double b) {
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  return std::max(a, b);
}

bool is_gpu_used(std::string_view name) {
  return name.size() > 14 && name.substr(0, 3) == "gpu" &&
         name.substr(name.size() - 11) == ".used_bytes";
}

void collect_keys(const nlohmann::json& value, std::vector<ParameterKey>& keys) {
  if (value.is_array()) {
    for (const auto& e : value) {
      if (e.is_string()) {
        keys.push_back({e.get<std::string>(), {}});
      } else if (e.is_object() && e.contains("name") && e["name"].is_string()) {
        ParameterKey k{e["name"].get<std::string>(), {}};
        if (e.contains("shape") && e["shape"].is_array())
          for (const auto& d : e["shape"])
            if (d.is_number_integer()) k.shape.push_back(d.get<std::int64_t>());
        keys.push_back(std::move(k));
      }
    }
  } else if (value.is_object()) {
    for (const auto& [name, e] : value.items()) {
      ParameterKey k{name, {}};
      if (e.is_object() && e.contains("shape") && e["shape"].is_array())
        for (const auto& d : e["shape"])
          if (d.is_number_integer()) k.shape.push_back(d.get<std::int64_t>());
      keys.push_back(std::move(k));
    }
  }
}

}  // namespace

std::vector<double> iteration_values(const StepRecord& step) {
  return {step.iteration_ns.begin(), step.iteration_ns.end()};
}

double iterations_per_second(const StepRecord& step) {
  if (step.iteration_ns.empty()) return std::nan("");
  double total = 0;
  for (auto d : step.iteration_ns) total += static_cast<double>(d);
  return total > 0 ? static_cast<double>(step.iteration_ns.size()) / (total / 1e9) : std::nan("");
}

double step_metric_max(const StepRecord& step, std::string_view metric) {
  double best = std::nan("");
  for (const auto& m : step.metrics)
    if (m.name == metric) best = fmax_nan(best, fmax_nan(m.peak, fmax_nan(m.before, m.after)));
  return best;
}

double run_metric_max(const Run& run, std::string_view metric) {
  double best = std::nan("");
  for (const auto& s : run.steps) best = fmax_nan(best, step_metric_max(s, metric));
  return best;
}

double step_gpu_peak(const StepRecord& step) {
  double best = std::nan("");
  for (const auto& m : step.metrics)
    if (is_gpu_used(m.name)) best = fmax_nan(best, fmax_nan(m.peak, fmax_nan(m.before, m.after)));
  return best;
}

bool is_program_rss(std::string_view metric) noexcept {
  return metric == "process.rss_bytes" || metric == "tree.rss_bytes";
}

double step_rss_max(const StepRecord& step) {
  const double own = step_metric_max(step, "process.rss_bytes");
  return std::isnan(own) ? step_metric_max(step, "tree.rss_bytes") : own;
}

double step_memory_peak(const StepRecord& step) {
  const double gpu = step_gpu_peak(step);
  return std::isnan(gpu) ? step_rss_max(step) : gpu;
}

Architecture run_architecture(const Run& run) {
  const Architecture declared = parse_architecture(run.pipeline.architecture);
  if (declared != Architecture::kUnknown) return declared;
  std::vector<ParameterKey> keys;
  auto scan = [&](const std::vector<Attachment>& attachments) {
    for (const auto& a : attachments) {
      if (a.type != "model_snapshot" || !a.data.is_object()) continue;
      for (const char* field : {"parameters", "tensors", "weights", "keys"})
        if (a.data.contains(field)) collect_keys(a.data[field], keys);
    }
  };
  scan(run.attachments);
  for (const auto& s : run.steps) scan(s.attachments);
  return detect_architecture(std::span<const ParameterKey>(keys)).architecture;
}

std::string_view status_name(StepStatus status) noexcept {
  switch (status) {
    case StepStatus::kOk: return "ok";
    case StepStatus::kFailed: return "failed";
    case StepStatus::kSkipped: return "skipped";
    case StepStatus::kRunning: return "running";
  }
  return "unknown";
}

}  // namespace genscope::detail
