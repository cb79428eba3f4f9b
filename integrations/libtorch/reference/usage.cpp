// Seed 003's model usage statistics, computed from the recorded run (no extra probing).
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "genscope/reference_pipeline.hpp"

namespace genscope {

/// Usage statistics of one reference run: initialisation (model loading) time, inference
/// time, outputs generated, per-metric peaks and the memory after each component load.
nlohmann::json usage_statistics(const Run& run, const DemoOptions& o, std::size_t generated) {
  std::int64_t init_ns = 0, inference_ns = 0;
  nlohmann::json after_load = nlohmann::json::array();
  std::set<std::string> byte_metrics;
  for (const StepRecord& s : run.steps) {
    for (const MetricFigures& m : s.metrics) {
      if (m.unit == Unit::kBytes) byte_metrics.insert(m.name);
    }
    if (s.parent_id >= 0) {
      if (s.kind == StepKind::kModelLoading) {
        nlohmann::json figures = nlohmann::json::object();
        for (const MetricFigures& m : s.metrics) {
          if (!std::isnan(m.after)) figures[m.name] = m.after;
        }
        after_load.push_back({{"stage", "after " + s.name}, {"memory", figures}});
      }
      continue;
    }
    if (s.kind == StepKind::kModelLoading)
      init_ns += s.duration_ns;
    else if (s.kind != StepKind::kSave && s.kind != StepKind::kCustom)
      inference_ns += s.duration_ns;
  }
  nlohmann::json peaks = nlohmann::json::object();
  for (const std::string& name : byte_metrics) {
    const double v = run.peak(name);
    if (!std::isnan(v)) peaks[name] = v;
  }
  const bool video = o.mode == "i2v";
  return {
      {"initialization_time_ns", init_ns},
      {"total_generated", generated},
      {"output_kind", video ? "video" : "image"},
      {"total_inference_time_ns", inference_ns},
      {"average_inference_time_ns",
       generated > 0 ? inference_ns / static_cast<std::int64_t>(generated) : 0},
      {"peak_memory", peaks},
      {"memory_after_component_load", after_load},
      {"device_name", o.device == "cuda" && !run.gpus.empty() ? run.gpus.front().name : o.device}};
}

}  // namespace genscope
