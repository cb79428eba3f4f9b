// Performance validation of a Run against Targets: per-target scores (0-100), "met" flags,
// diagnostics with evidence, architecture-aware recommendations and the before -> after
// score change. Formulas and thresholds: docs/validation.md.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "genscope/run.hpp"
#include "genscope/targets.hpp"

namespace genscope {

/// Model architecture families that performance rules distinguish.
enum class Architecture { kUnknown, kUNet, kMMDiT, kVideoDiT };

/// Stable name: "unknown", "UNet", "MMDiT", "video DiT".
std::string_view to_string(Architecture architecture) noexcept;
/// Parses a name case-insensitively ("unet", "mmdit", "video dit", "video_dit", "dit-video").
Architecture parse_architecture(std::string_view name) noexcept;

/// A parameter name with its shape when known (empty shape = unknown).
struct ParameterKey {
  std::string name;
  std::vector<std::int64_t> shape;
};

/// The detected architecture and the key that decided it.
struct ArchitectureGuess {
  Architecture architecture = Architecture::kUnknown;
  std::string evidence;  ///< The parameter name (and rule) that decided it.
};

/// Detects the architecture from parameter names (model snapshot table, safetensors keys).
ArchitectureGuess detect_architecture(std::span<const ParameterKey> keys);
/// Same, names only.
ArchitectureGuess detect_architecture(std::span<const std::string> names);

/// Score of a "lower is better" figure against its ceiling: 100 when actual <= limit, else
/// 100 * limit / actual. NaN when actual is unknown.
double score_ceiling(double actual, double limit) noexcept;
/// Score of a "higher is better" figure against its floor: 100 when actual >= floor, else
/// 100 * actual / floor. NaN when actual is unknown.
double score_floor(double actual, double floor) noexcept;

/// The outcome of one target.
struct TargetResult {
  std::string scope;   ///< "run" or the step name.
  std::string target;  ///< "max_duration", "window", "max_peak:<metric>", "min_it_per_s".
  double limit = kNaN;   ///< The target value (ns, bytes or it/s).
  double actual = kNaN;  ///< The measured value; NaN when not measured.
  bool met = false;
  double score = kNaN;   ///< 0-100; NaN when not measured (excluded from the overall score).
  std::string note;      ///< e.g. "below window minimum", "step not found".
};

/// A finding that explains a missed target or a quality problem, with its evidence.
struct Diagnostic {
  std::string id;    ///< Stable: dominant_step, memory_headroom_low, slow_first_iteration,
                     ///< high_iteration_variance, fallback_used, non_finite_output,
                     ///< low_gpu_utilization.
  std::string step;  ///< The step it concerns; empty for the run.
  std::string message;
  nlohmann::json evidence;  ///< The figures that triggered it.
};

/// A recommendation from the rule table and the diagnostic that triggered it.
struct Recommendation {
  std::string diagnostic;  ///< The triggering Diagnostic::id.
  std::string step;
  std::string text;
  nlohmann::json evidence;
};

/// Everything validate() found.
struct Validation {
  Architecture architecture = Architecture::kUnknown;
  std::vector<TargetResult> results;
  bool met = true;      ///< All measured targets met.
  double score = kNaN;  ///< Geometric mean of the measured target scores; NaN when none.
  std::vector<Diagnostic> diagnostics;
  std::vector<Recommendation> recommendations;
};

/// Evaluates targets, diagnostics and recommendations for a finished run.
Validation validate(const Run& run, const Targets& targets);
/// Diagnostics alone (dominant_step only when `time_missed`).
std::vector<Diagnostic> diagnose(const Run& run, bool time_missed);
/// Recommendations of the static rule table for the given diagnostics.
std::vector<Recommendation> recommend(Architecture architecture, const Run& run,
                                      std::span<const Diagnostic> diagnostics);

/// The JSON of a validation (targets, results, score, diagnostics, recommendations).
nlohmann::json to_json(const Validation& validation);
/// validate() as the "performance" document for reports and the history store.
nlohmann::json performance_report(const Run& run, const Targets& targets);
/// performance_report() wrapped as Attachment{"performance", "performance", ...}.
Attachment performance_attachment(const Run& run, const Targets& targets);

/// The before -> after change of two validations' scores and met flags.
nlohmann::json score_change(const Validation& before, const Validation& after);

}  // namespace genscope
