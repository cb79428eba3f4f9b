// Regression detection over the run history: per pipeline and step, the latest run(s)
// against a baseline window (median and MAD). Threshold: docs/history.md.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

namespace genscope {

/// One stored duration: a step (or "(run)") of one run.
struct Observation {
  std::string pipeline;
  std::string step;
  std::int64_t start_unix_ns = 0;
  double duration_ns = 0;
  std::string run_id;
};

/// Regression thresholds.
struct RegressionOptions {
  std::size_t window = 20;     ///< Baseline runs before the latest ones.
  std::size_t latest = 1;      ///< Latest runs compared (their median).
  std::size_t min_baseline = 5;  ///< Fewer baseline runs: no verdict.
  double z_threshold = 4.0;    ///< (latest - median) / (1.4826 * MAD) must exceed this...
  double min_effect = 0.08;    ///< ...and the relative slowdown must exceed this.
  std::string pipeline;        ///< Only this pipeline when not empty.
};

/// One series' verdict.
struct RegressionFinding {
  std::string pipeline;
  std::string step;
  std::vector<std::string> latest_run_ids;
  std::size_t baseline_runs = 0;
  double baseline_median_ns = 0;
  double baseline_mad_ns = 0;
  double latest_ns = 0;      ///< Median of the latest runs.
  double change_percent = 0;
  double z = 0;              ///< Robust z score (infinite when MAD is 0 and latest differs).
  bool regression = false;
};

/// Evaluates every (pipeline, step) series; observations may come in any order.
std::vector<RegressionFinding> find_regressions(std::span<const Observation> observations,
                                                const RegressionOptions& options = {});
/// JSON form.
nlohmann::json to_json(std::span<const RegressionFinding> findings);

}  // namespace genscope
