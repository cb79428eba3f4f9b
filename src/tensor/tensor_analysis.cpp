// JSON builders of tensor analyses (the "tensor" attachment of a step).
#include "genscope/tensor_analysis.hpp"

#include <cmath>

namespace genscope {
namespace {

nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

nlohmann::json candidates_json(const std::vector<FamilyCandidate>& candidates) {
  nlohmann::json arr = nlohmann::json::array();
  for (const FamilyCandidate& c : candidates) {
    arr.push_back({{"family", family_name(c.family)}, {"reason", c.reason}});
  }
  return arr;
}

nlohmann::json unique_family(const std::vector<FamilyCandidate>& candidates) {
  return candidates.size() == 1 ? nlohmann::json(family_name(candidates[0].family))
                                : nlohmann::json();
}

void add_checks(nlohmann::json& arr, const std::vector<ValidationCheck>& checks) {
  for (const ValidationCheck& c : checks) {
    arr.push_back({{"name", c.name}, {"passed", c.passed}, {"reason", c.reason}});
  }
}

}  // namespace

std::string_view role_name(TensorRole role) noexcept {
  switch (role) {
    case TensorRole::kConditioning: return "conditioning";
    case TensorRole::kPooled: return "pooled";
    case TensorRole::kLatent: return "latent";
    case TensorRole::kImage: return "image";
    case TensorRole::kOther: break;
  }
  return "other";
}

nlohmann::json tensor_stats_json(const TensorStats& s) {
  return {
      {"numel", s.numel},
      {"bytes", s.bytes},
      {"finite_count", s.finite_count},
      {"nan_count", s.nan_count},
      {"pos_inf_count", s.pos_inf_count},
      {"neg_inf_count", s.neg_inf_count},
      {"zero_count", s.zero_count},
      {"min", num(s.min)},
      {"max", num(s.max)},
      {"mean", num(s.mean)},
      {"std", num(s.std)},
      {"abs_max", num(s.abs_max)},
      {"l2_norm", num(s.l2_norm)},
      {"hash", s.hashed ? nlohmann::json(hash_hex(s.hash)) : nlohmann::json()},
  };
}

nlohmann::json conditioning_json(const ConditioningClassification& c) {
  return {{"kind", "conditioning"},
          {"role", c.role},
          {"tokens", c.tokens},
          {"width", c.width},
          {"family", unique_family(c.candidates)},
          {"candidates", candidates_json(c.candidates)},
          {"notes", c.notes}};
}

nlohmann::json latent_json(const LatentClassification& c) {
  return {{"kind", "latent"},
          {"layout", layout_name(c.layout)},
          {"batch", c.batch},
          {"channels", c.channels},
          {"frames", c.frames},
          {"height", c.height},
          {"width", c.width},
          {"tokens", c.tokens},
          {"family", unique_family(c.candidates)},
          {"candidates", candidates_json(c.candidates)},
          {"spatial_ratio", c.spatial_ratio > 0 ? nlohmann::json(c.spatial_ratio) : nlohmann::json()},
          {"temporal_ratio",
           c.temporal_ratio > 0 ? nlohmann::json(c.temporal_ratio) : nlohmann::json()},
          {"notes", c.notes}};
}

nlohmann::json comparison_json(const TensorComparison& c) {
  return {{"shape_match", c.shape_match},
          {"dtype_match", c.dtype_match},
          {"numel", c.numel},
          {"compared_count", c.compared_count},
          {"max_abs_error", num(c.max_abs_error)},
          {"mean_abs_error", num(c.mean_abs_error)},
          {"rmse", num(c.rmse)},
          {"max_rel_error", std::isnan(c.max_rel_error) ? nlohmann::json()
                            : std::isinf(c.max_rel_error) ? nlohmann::json("inf")
                                                          : nlohmann::json(c.max_rel_error)},
          {"cosine_similarity", num(c.cosine_similarity)},
          {"psnr_db", std::isinf(c.psnr_db) && c.psnr_db > 0 ? nlohmann::json("inf")
                                                             : num(c.psnr_db)},
          {"allclose", c.allclose},
          {"mismatch_count", c.mismatch_count},
          {"nan_mismatch_count", c.nan_mismatch_count},
          {"worst_index", c.worst_index},
          {"worst_a", num(c.worst_a)},
          {"worst_b", num(c.worst_b)}};
}

nlohmann::json family_verdict_json(const FamilyVerdict& v) {
  return {{"schema", "genscope.family_verdict/1"},
          {"family", unique_family(v.candidates)},
          {"candidates", candidates_json(v.candidates)},
          {"notes", v.notes}};
}

nlohmann::json tensor_analysis_json(const TensorView& view, TensorRole role,
                                    const AnalysisOptions& options) {
  return tensor_analysis_json(view, role, options, compute_stats(view, options.stats));
}

nlohmann::json tensor_analysis_json(const TensorView& view, TensorRole role,
                                    const AnalysisOptions& options, const TensorStats& stats) {
  nlohmann::json j{
      {"schema", "genscope.tensor/1"},
      {"role", role_name(role)},
      {"shape", view.shape},
      {"strides", view.strides.empty() ? nlohmann::json() : nlohmann::json(view.strides)},
      {"contiguous", view.is_contiguous()},
      {"dtype", dtype_name(view.dtype)},
      {"device", view.device},
      {"stats", tensor_stats_json(stats)},
  };
  nlohmann::json checks = nlohmann::json::array();
  std::vector<HealthFlag> flags;
  if (role == TensorRole::kConditioning || role == TensorRole::kPooled) {
    const ConditioningClassification c = classify_conditioning(view.shape, options.pooled_shape);
    j["classification"] = conditioning_json(c);
    if (options.declared_family) {
      add_checks(checks, {check_conditioning_family(view.shape, *options.declared_family)});
    }
    flags = tensor_health(stats);
  } else if (role == TensorRole::kLatent) {
    const LatentClassification c = classify_latent(view.shape, options.source);
    j["classification"] = latent_json(c);
    add_checks(checks, c.checks);
    if (options.declared_family) {
      bool found = false;
      for (const FamilyCandidate& f : c.candidates) found = found || f.family == *options.declared_family;
      add_checks(checks, {{"latent_family", found,
                           std::string(family_name(*options.declared_family)) +
                               (found ? " fits the latent shape" : " does not fit the latent shape")}});
      const std::vector<FamilyCandidate> declared{{*options.declared_family, "declared"}};
      flags = latent_health(stats, declared);
    } else {
      flags = latent_health(stats, c.candidates);
    }
  } else {
    j["classification"] = nullptr;
    flags = tensor_health(stats);
  }
  if (!options.expected_device.empty()) {
    add_checks(checks, {check_device(view.device, options.expected_device)});
  }
  if (options.expected_dtype) add_checks(checks, {check_dtype(view.dtype, *options.expected_dtype)});
  if (options.memory_threshold_bytes > 0) {
    add_checks(checks, {check_memory(stats.bytes, options.memory_threshold_bytes)});
  }
  nlohmann::json flags_json = nlohmann::json::array();
  for (const HealthFlag& f : flags) {
    flags_json.push_back({{"name", f.name}, {"severity", f.severity}, {"message", f.message}});
  }
  j["flags"] = std::move(flags_json);
  j["checks"] = std::move(checks);
  return j;
}

}  // namespace genscope
