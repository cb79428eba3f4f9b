// The Run value: everything one monitored execution recorded, as plain data.
//
// Probes and analyses fill a Run; every report, export, comparison and the history store
// reads this value (or its JSON form, see run_json.hpp), never the live monitor.
// Times are nanoseconds, memory is bytes; conversion happens only when rendering.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "genscope/distributed.hpp"
#include "genscope/metric.hpp"
#include "genscope/step_kind.hpp"

namespace genscope {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
/// The schema identifier written into every run document.
inline constexpr const char* kRunSchema = "genscope.run/1";

/// The machine a run executed on.
struct HostInfo {
  std::string hostname;
  std::string cpu_model;
  int cpu_cores = 0;
  double ram_bytes = 0;
  std::string os;  ///< Kernel name and release, e.g. "Linux 6.1.0".
};

/// One GPU as seen through NVML when the run started.
struct GpuInfo {
  int index = 0;
  std::string name;
  std::string uuid;
  std::string driver_version;
  double total_bytes = 0;
};

/// What was run: pipeline name, model, architecture and free-form parameters.
struct PipelineInfo {
  std::string name;
  std::string model;
  std::string architecture;  ///< "UNet", "MMDiT", "video DiT", ... or empty.
  std::map<std::string, std::string> parameters;  ///< resolution, steps, frames, seed, ...
};

/// A monitoring failure: recorded, never thrown into the pipeline.
struct MonitoringError {
  std::string source;   ///< The probe or analysis that failed ("nvml", "process", ...).
  std::string message;  ///< What went wrong.
  std::int64_t offset_ns = 0;  ///< When, from the run start.
  std::string step;     ///< The innermost open step on the failing thread, if any.
};

/// A probe whose source is not on this machine (no NVIDIA driver, no GPU): not an error.
struct AbsentProbe {
  std::string probe;   ///< Probe name, e.g. "nvml".
  std::string reason;  ///< Why, e.g. "no NVIDIA driver library (libnvidia-ml.so.1 not found)".
};

/// One figure of one step: before, after and the peak in between.
struct MetricFigures {
  std::string name;  ///< As in MetricInfo::name, e.g. "process.rss_bytes".
  Unit unit = Unit::kBytes;
  double before = kNaN;  ///< Value at step start.
  double after = kNaN;   ///< Value at step end.
  double peak = kNaN;    ///< Highest value seen during the step.
  std::int64_t peak_offset_ns = -1;  ///< When the peak was seen, from the step start; -1 unknown.
  /// How the peak was obtained: "exact" (kernel/allocator high-water mark), "sampled"
  /// (sampler maximum) or "endpoints" (max of before/after only).
  std::string peak_source;

  /// after - before (NaN when either is unknown).
  double delta() const noexcept { return after - before; }
  /// (after - before) / before * 100; NaN when before is 0 or unknown.
  double delta_percent() const noexcept;
  /// Share of the memory added up to the peak that was released by the step end:
  /// (peak - after) / (peak - before); NaN when the peak did not exceed before.
  double cleanup_effectiveness() const noexcept;
};

/// One strategy of a fallback chain (e.g. VAE encode: direct -> tiled -> cpu -> dummy).
struct Attempt {
  std::string strategy;
  StepStatus outcome = StepStatus::kOk;
  std::string error;  ///< Why it failed; empty when it succeeded.
  std::int64_t duration_ns = 0;
};

/// Summary of per-iteration durations (the denoising loop).
struct IterationStats {
  std::size_t count = 0;
  double first_ns = kNaN;   ///< The first iteration (warm-up / compilation cost).
  double mean_ns = kNaN;    ///< Mean over all iterations.
  double mean_rest_ns = kNaN;  ///< Mean excluding the first iteration.
  double p50_ns = kNaN;
  double p95_ns = kNaN;
  double min_ns = kNaN;
  double max_ns = kNaN;
  double stddev_ns = kNaN;  ///< Sample standard deviation.
  double total_ns = 0;
  double iterations_per_second = kNaN;  ///< count / total.
};

/// Computes the iteration summary from raw durations.
IterationStats summarize_iterations(std::span<const std::int64_t> durations_ns);

/// An analysis attached to a step or a run: tensor statistics, model snapshot, LoRA report...
/// `type` selects how reports render `data` ("tensor", "text", "model_snapshot", ...).
struct Attachment {
  std::string type;
  std::string name;
  nlohmann::json data;
};

/// A named phase of the pipeline.
struct StepRecord {
  int id = 0;          ///< Unique within the run, in opening order.
  int parent_id = -1;  ///< Enclosing step on the same thread, -1 for a top-level step.
  std::string name;
  StepKind kind = StepKind::kCustom;
  StepStatus status = StepStatus::kRunning;
  std::string error_type;     ///< Exception type of a failure ("std::bad_alloc").
  std::string error_message;  ///< Exception message or the reason of a failure/skip.
  std::string source;         ///< "file:line" of the instrumentation point, when known.
  int thread = 0;             ///< Small per-run thread number (0 = first thread seen).
  std::int64_t start_offset_ns = 0;  ///< From the run start.
  std::int64_t duration_ns = 0;
  std::vector<MetricFigures> metrics;
  std::vector<Attempt> attempts;
  std::vector<std::int64_t> iteration_ns;  ///< Raw per-iteration durations.
  /// True when some durations were inferred rather than observed one by one (e.g. a progress
  /// bar that showed several iterations in one redraw: its time is spread evenly over them).
  bool iterations_inferred = false;
  std::map<std::string, double> counters;  ///< items, frames, bytes, characters, tokens, ...
  std::map<std::string, std::string> labels;
  std::vector<Attachment> attachments;
  /// How the step's end was known: "explicit", "inferred:<reason>" or "run_end"
  /// (step_tree.hpp); empty until it ends (documents written before the field read as
  /// "explicit").
  std::string closed_by;
  /// True when the step itself was inferred (no line or event announced it, e.g. a phase
  /// read from the gap between two others); label `inferred.reason` says from what.
  bool inferred = false;

  /// Looks a metric up by name; nullptr when absent.
  const MetricFigures* metric(std::string_view name) const noexcept;
  /// counter / duration in seconds (e.g. frames per second); NaN when absent or zero time.
  double rate(std::string_view counter) const noexcept;
};

/// The sampled time series: bounded, older samples downsampled (max of merged samples).
struct TimeSeries {
  std::vector<std::string> metrics;  ///< Column names.
  std::vector<Unit> units;           ///< Column units.
  std::vector<std::int64_t> offset_ns;  ///< Sample times from the run start.
  std::vector<double> values;  ///< Row-major: values[i * metrics.size() + m].
  std::int64_t interval_ns = 0;   ///< Configured sampling interval (near events).
  /// Adaptive cadence: the longest interval between samples while nothing happens; 0 or
  /// `interval_ns` for a fixed cadence.
  std::int64_t max_interval_ns = 0;
  std::uint64_t samples_taken = 0;  ///< Samples taken, before downsampling.
  std::size_t capacity = 0;       ///< The bound on stored samples.

  std::size_t size() const noexcept { return offset_ns.size(); }
  double at(std::size_t row, std::size_t column) const noexcept {
    return values[row * metrics.size() + column];
  }
};

/// One monitored execution.
struct Run {
  std::string schema = kRunSchema;
  std::string id;              ///< Random 128-bit id, hex.
  std::string start_utc;       ///< ISO 8601, e.g. "2026-11-21T12:00:00.123Z".
  std::int64_t start_unix_ns = 0;
  std::int64_t duration_ns = 0;
  std::string genscope_version;
  HostInfo host;
  std::vector<GpuInfo> gpus;
  PipelineInfo pipeline;
  std::map<std::string, std::string> labels;
  /// Rank, world size, local rank and group when the run belongs to a distributed job
  /// (distributed.hpp); nullopt for a run of a single process.
  std::optional<DistributedInfo> distributed;
  std::vector<std::string> probes;  ///< Probes that were opened successfully.
  std::vector<AbsentProbe> absent_probes;  ///< Probes with nothing to read on this machine.
  /// Notes on how figures were obtained (e.g. "VmHWM reset refused: peaks are sampled").
  std::vector<std::string> notes;
  std::vector<StepRecord> steps;  ///< In opening order.
  TimeSeries series;
  std::vector<MonitoringError> monitoring_errors;
  std::vector<Attachment> attachments;  ///< Run-level analyses (performance, usage, ...).

  /// Looks a step up by name (first match); nullptr when absent.
  const StepRecord* step(std::string_view name) const noexcept;
  /// Highest peak of a metric over all steps; NaN when never seen.
  double peak(std::string_view metric) const noexcept;
};

}  // namespace genscope
