// MetricsModel: the figures genscope exposes to Prometheus, filled from live events or from a
// finished Run, and their names (the only place metric names are decided; docs/metrics.md).
//
// The live endpoint feeds it the Sink events as they come; render_metrics(run) replays a
// finished Run through the same calls (run_started, step_ended per step, sample per series
// row, run_finished), so both give the same families for the same run.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "genscope/run.hpp"
#include "report/metrics_exposition.hpp"

namespace genscope::detail {

/// Upper bounds (seconds) of the step and iteration duration histograms: 1 ms to 2500 s.
inline constexpr std::array<double, 20> kDurationBounds = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
    2.5,   5,      10,    25,   50,    100,  250, 500,  1000, 2500};

/// A cumulative histogram over kDurationBounds.
struct DurationHistogram {
  std::array<std::uint64_t, kDurationBounds.size()> buckets{};  ///< Not cumulative.
  std::uint64_t count = 0;
  double sum = 0;
  /// Adds one observation in seconds (NaN and negative values are ignored).
  void observe(double seconds) noexcept;
  /// The cumulative counts per bound, as the exposition writes them.
  std::vector<std::uint64_t> cumulative() const;
};

/// How one sampled column (probe figure) is exposed.
struct ColumnMetric {
  std::string column;       ///< The dotted genscope name, e.g. "gpu0.used_bytes".
  std::string family;       ///< e.g. "genscope_gpu_memory_used_bytes".
  std::string unit;         ///< OpenMetrics unit ("bytes", "ratio", ...) or empty.
  std::string help;
  LabelSet labels;          ///< e.g. {{"gpu", "0"}}.
  double scale = 1;         ///< Percent columns become ratios (× 0.01).
  std::string peak_family;  ///< e.g. "genscope_gpu_memory_used_peak_bytes"; empty = no peak.
};

/// The Prometheus name of a probe figure (public so tests and docs can check the table).
ColumnMetric map_column(const std::string& column, Unit unit);

class MetricsModel {
 public:
  /// Distinct (kind, step name) pairs kept for the per-step gauges; later names are not
  /// exported one by one (they still count in the per-kind histograms and counters).
  static constexpr std::size_t kMaxStepNames = 256;

  void run_started(const Run& run);
  void step_began(const StepRecord& step);
  void iteration(int step_id, std::int64_t duration_ns);
  void step_ended(const StepRecord& step);
  void sample(std::span<const double> values);
  void monitoring_error(const MonitoringError& error);
  void run_finished(const Run& run);

  /// Replays a finished run into a fresh model.
  static MetricsModel from_run(const Run& run);
  /// The families as of `now_unix_ns` (the elapsed times of the open steps and of an active
  /// run are computed against it).
  std::vector<MetricFamily> families(std::int64_t now_unix_ns) const;

 private:
  struct OpenStep {
    StepKind kind = StepKind::kCustom;
    std::string name;
    int thread = 0;
    std::int64_t start_offset_ns = 0;
    std::uint64_t iterations = 0;
    std::int64_t iteration_ns = 0;
  };
  struct LastStep {
    double duration_seconds = kNaN;
    double iterations_per_second = kNaN;
    std::vector<std::pair<std::string, double>> peaks;  ///< (column, peak) of peak columns.
  };
  using StepKey = std::pair<StepKind, std::string>;

  // The current (or last) run.
  bool has_run_ = false;
  bool active_ = false;
  std::int64_t start_unix_ns_ = 0;
  std::int64_t duration_ns_ = 0;
  PipelineInfo pipeline_;
  std::optional<DistributedInfo> distributed_;  // a rank's run: rank labels on run_info
  std::string host_;
  std::vector<GpuInfo> gpus_;
  std::vector<ColumnMetric> columns_;
  std::vector<double> values_;  ///< Last sampled value per column.
  std::vector<double> peaks_;   ///< Run's peak per column so far (peak columns only).
  std::map<int, OpenStep> open_;
  std::map<std::string, std::uint64_t> run_errors_;  ///< This run's errors seen live, by source.
  std::uint64_t run_samples_ = 0;

  // Accumulated over every run since the model was created (counters never go down).
  std::map<StepKind, DurationHistogram> step_durations_;
  std::map<StepKind, DurationHistogram> iteration_durations_;
  std::map<std::pair<StepKind, StepStatus>, double> steps_;
  std::map<std::tuple<StepKind, std::string, StepStatus>, double> attempts_;
  std::map<StepKind, double> iterations_;
  std::map<std::pair<StepKind, std::string>, double> work_;
  std::map<std::string, double> errors_;
  std::map<std::string, double> runs_;
  std::uint64_t samples_ = 0;
  std::map<StepKey, LastStep> last_steps_;
};

}  // namespace genscope::detail
