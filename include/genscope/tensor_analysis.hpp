// Tensor analysis for a Step: statistics + classification + health flags + validation
// checks as one JSON attachment of type "tensor" (layout: docs/tensor-analysis.md).
//
// Example:
//   genscope::analyze_tensor(step, "positive", view, genscope::TensorRole::kConditioning,
//                            {.declared_family = genscope::ModelFamily::kSDXL});
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "genscope/tensor_classify.hpp"
#include "genscope/tensor_compare.hpp"
#include "genscope/tensor_stats.hpp"
#include "genscope/tensor_view.hpp"

namespace genscope {

class Step;

/// What a tensor is in the pipeline.
enum class TensorRole { kConditioning, kPooled, kLatent, kImage, kOther };
/// "conditioning", "pooled", "latent", "image", "other".
std::string_view role_name(TensorRole role) noexcept;

/// Expectations and context for an analysis; empty fields skip their check.
struct AnalysisOptions {
  std::optional<ModelFamily> declared_family;  ///< The family the pipeline claims to run.
  std::string expected_device;                 ///< "cuda", "cuda:0", "cpu"; empty = no check.
  std::optional<DType> expected_dtype;         ///< Expected dtype; nullopt = no check.
  SourceSize source;  ///< Pixel-space height/width/frames for latent ratios and size checks.
  std::int64_t memory_threshold_bytes = 0;  ///< Tensor bytes limit; 0 = no check.
  std::optional<std::vector<std::int64_t>> pooled_shape;  ///< Pooled companion of a context.
  StatsOptions stats;  ///< Passed to compute_stats.
};

/// JSON of statistics (non-finite figures become null; hash as hex).
nlohmann::json tensor_stats_json(const TensorStats& stats);
/// JSON of a conditioning classification.
nlohmann::json conditioning_json(const ConditioningClassification& c);
/// JSON of a latent classification.
nlohmann::json latent_json(const LatentClassification& c);
/// JSON of a pipeline's family verdict ({"family": unique or null, "candidates", "notes"}).
nlohmann::json family_verdict_json(const FamilyVerdict& v);
/// JSON of a comparison (for "tensor_comparison" attachments).
nlohmann::json comparison_json(const TensorComparison& c);
/// Computes stats, classification, flags and checks of `view`; throws genscope::Error for
/// an invalid view.
nlohmann::json tensor_analysis_json(const TensorView& view, TensorRole role,
                                    const AnalysisOptions& options = {});
/// The same with statistics computed elsewhere (a StatsAccumulator fed piece by piece):
/// `view` gives the shape, strides, dtype and device; its data is not read.
nlohmann::json tensor_analysis_json(const TensorView& view, TensorRole role,
                                    const AnalysisOptions& options, const TensorStats& stats);
/// Attaches tensor_analysis_json as {"tensor", name, json} to `step`. Never throws: a
/// failure is recorded with step.record_monitoring_error("tensor_analysis", ...).
void analyze_tensor(Step& step, std::string_view name, const TensorView& view, TensorRole role,
                    const AnalysisOptions& options = {}) noexcept;

}  // namespace genscope
