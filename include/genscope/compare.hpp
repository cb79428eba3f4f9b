// Comparison of runs: per step time and memory change, target achievement change, and with
// several runs per side a noise-aware verdict (Mann-Whitney U + minimum effect).
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "genscope/run.hpp"
#include "genscope/targets.hpp"

namespace genscope {

/// How comparisons decide.
struct CompareOptions {
  double alpha = 0.01;             ///< Mann-Whitney significance level (groups of >= 3 runs).
  double min_effect = 0.05;        ///< Minimum |relative median change| for a verdict.
  double significant_percent = 50;  ///< Seed 004: "significant" when > 50% faster.
};

/// One step (or the whole run, named "(run)") before and after.
struct StepComparison {
  std::string step;
  std::size_t before_runs = 0;
  std::size_t after_runs = 0;
  double before_ns = kNaN;  ///< Median duration over the before runs.
  double after_ns = kNaN;   ///< Median duration over the after runs.
  double change_percent = kNaN;       ///< (after - before) / before * 100.
  double improvement_percent = kNaN;  ///< (before - after) / before * 100.
  double factor = kNaN;               ///< before / after (speed-up factor).
  double before_peak_bytes = kNaN;    ///< Median peak memory (GPU used, else RSS).
  double after_peak_bytes = kNaN;
  double memory_change_bytes = kNaN;
  double p_value = kNaN;  ///< Mann-Whitney p (NaN with fewer than 3 runs on a side).
  double ratio_low = kNaN;   ///< Bootstrap 95% CI of after/before medians (groups only).
  double ratio_high = kNaN;
  bool significant = false;  ///< Improvement above CompareOptions::significant_percent.
  std::string verdict;  ///< "faster", "slower", "unchanged", "missing" (absent on a side).
};

/// The whole comparison.
struct RunComparison {
  std::vector<std::string> before_ids;
  std::vector<std::string> after_ids;
  std::vector<StepComparison> steps;  ///< "(run)" first, then steps in the after order.
  double before_score = kNaN;  ///< Median validation score per side (when targets given).
  double after_score = kNaN;
  bool before_met = false;
  bool after_met = false;
};

/// Compares two single runs (targets optional: nullptr skips the achievement change).
RunComparison compare_runs(const Run& before, const Run& after, const Targets* targets = nullptr,
                           const CompareOptions& options = {});
/// Compares groups of runs with a noise-aware verdict per step.
RunComparison compare_groups(std::span<const Run> before, std::span<const Run> after,
                             const Targets* targets = nullptr,
                             const CompareOptions& options = {});
/// JSON form (docs/validation.md).
nlohmann::json to_json(const RunComparison& comparison);
/// Console table.
std::string render_comparison(const RunComparison& comparison);

}  // namespace genscope
