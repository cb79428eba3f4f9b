// Monitor and ActiveRun: the live side of genscope.
//
// A Monitor owns the probes and one sampler thread; it starts runs. An ActiveRun hands out
// RAII Step scopes, and finish() turns everything recorded into a plain Run value.
//
// Example:
//   genscope::Monitor monitor;
//   genscope::ActiveRun run = monitor.start_run({.pipeline = {.name = "t2i"}});
//   {
//     genscope::Step step = run.step(genscope::StepKind::kModelLoading, "load unet");
//     load_unet();
//   }
//   genscope::Run result = run.finish();
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "genscope/otlp.hpp"
#include "genscope/probe.hpp"
#include "genscope/run.hpp"
#include "genscope/sink.hpp"
#include "genscope/step.hpp"
#include "genscope/usage_stats.hpp"

namespace genscope {

/// How a Monitor samples.
struct MonitorOptions {
  /// Master switch; false makes every step a no-op. GENSCOPE_DISABLE=1 also turns it off.
  bool enabled = true;
  /// Sampling interval of the background thread near events (clamped to >= 1 ms): after a
  /// step begins or ends and while a sample differs from the one before by more than 2 %.
  std::chrono::microseconds sample_interval{10'000};
  /// Adaptive cadence: while nothing happens the interval doubles after each quiet sample up
  /// to this bound; a step boundary or a change brings it back to `sample_interval`. Per-step
  /// peaks stay exact whatever the cadence (high-water marks); only the timeline's
  /// resolution between events is coarser. Equal to (or below) `sample_interval`: a fixed
  /// cadence.
  std::chrono::microseconds max_sample_interval{500'000};
  bool sampler = true;        ///< Run the background sampler thread.
  bool process_probe = true;  ///< RSS and exact VmHWM peaks.
  bool system_probe = true;   ///< /proc/meminfo.
  bool nvml_probe = true;     ///< NVIDIA GPUs, when libnvidia-ml loads.
  std::string nvml_library;   ///< Overrides the NVML path (else GENSCOPE_NVML_LIBRARY).
  /// Longest a blocking probe (NVML) may take before it is recorded as hung and skipped.
  std::chrono::milliseconds probe_timeout{500};
  /// Bound on stored samples; older ones are merged pairwise (keeping maxima) when full.
  std::size_t series_capacity = 8192;
  /// Append step lines to this file; empty = the GENSCOPE_LOG environment variable.
  std::string log_path;
  /// Record every finished run in the history database (docs/history.md). A failure to
  /// record is a monitoring error of that run, never an exception.
  bool record = false;
  /// The history database; empty = $XDG_DATA_HOME/genscope/history.db.
  std::string history_db;
  /// Longest ActiveRun::finish() waits for the sinks to receive the finished run (and the
  /// Monitor's destructor for them to drain) before going on without them.
  std::chrono::milliseconds sink_timeout{10'000};
  /// Live events queued for the sinks beyond which new ones are dropped (and counted).
  std::size_t sink_queue_capacity = 65'536;
  /// Serve live Prometheus metrics on http://metrics_bind:metrics_port/metrics
  /// (docs/metrics.md); 0 = off. A port that cannot be bound is a monitoring error of each
  /// run. (For a system-chosen port, add a genscope::MetricsEndpoint yourself.)
  std::uint16_t metrics_port = 0;
  /// The address the metrics endpoint binds ("0.0.0.0" = every IPv4 interface).
  std::string metrics_bind = "127.0.0.1";
  /// Push every finished run's metrics to this Pushgateway, e.g. "http://127.0.0.1:9091";
  /// empty = off. A failed push is a monitoring error of that run.
  std::string pushgateway_url;
  /// Export every finished run to an OpenTelemetry collector over OTLP/HTTP when
  /// `otlp.enabled` or `otlp.endpoint` is set (docs/opentelemetry.md). A failed or slow
  /// export is a monitoring error of the run (source "otlp"), never an exception.
  OtlpOptions otlp;
};

/// Which tensors analysed with analyze_tensor() are also written to disk, and how.
struct TensorDumpOptions {
  std::filesystem::path directory;  ///< Empty: no dumps.
  std::vector<std::string> roles;   ///< Roles to dump ("conditioning", "latent", ...); empty = all.
  std::vector<StepKind> kinds;      ///< Step kinds to dump; empty = all.
  /// .safetensors with __metadata__ (analysis, run id, step) instead of .npy.
  bool safetensors = false;
};

/// What a run is about.
struct RunOptions {
  PipelineInfo pipeline;
  std::map<std::string, std::string> labels;
  TensorDumpOptions dumps;  ///< Tensor dumps (off by default).
  /// The run's place in a distributed job; nullopt = read from the environment
  /// (distributed_from_environment(); a malformed RANK/WORLD_SIZE is a monitoring error).
  std::optional<DistributedInfo> distributed;
  /// When the run began (Step::now_ns() clock); 0 = now. A watched program's run begins
  /// when its first line was read, not when genscope got to it.
  std::int64_t start_steady_ns = 0;
};

class Monitor;
namespace detail {
struct RunState;
struct MonitorState;
}  // namespace detail

/// A run in progress. Movable; steps must end before finish().
class ActiveRun {
 public:
  ActiveRun() = default;
  ActiveRun(ActiveRun&&) noexcept;
  ActiveRun& operator=(ActiveRun&&) noexcept;
  ~ActiveRun();

  /// Opens a step; it ends when the returned scope is destroyed or ended.
  Step step(StepKind kind, std::string_view name, const char* source = nullptr);
  /// Opens a step that began at `start_steady_ns` (Step::now_ns() clock): for a phase read
  /// from a program's output, timed by when its line was read (so a replayed transcript
  /// keeps its own clock). Its baseline figures are taken now.
  Step step_at(std::int64_t start_steady_ns, StepKind kind, std::string_view name,
               const char* source = nullptr);
  /// Runs `fn(step)` inside a step. An exception from `fn` is recorded (type and message)
  /// on the step and rethrown unchanged.
  template <class F>
  decltype(auto) run_step(StepKind kind, std::string_view name, F&& fn) {
    Step s = step(kind, name);
    try {
      return fn(s);
    } catch (...) {
      s.fail_with_current_exception();
      throw;
    }
  }
  /// Adds a step that has already ended and was timed elsewhere (reported by a watched
  /// program, or forwarded from another process): it started at `start_steady_ns`
  /// (Step::now_ns() clock) and lasted `step.duration_ns`. Its id and thread are assigned
  /// here and `parent_id` must name a step of this run or be -1; each probe figure the
  /// record lacks is filled from the run's samples in that interval ("sampled", or
  /// "endpoints" when no sample fell inside). Returns the step id; -1 when not recorded.
  int add_step(StepRecord step, std::int64_t start_steady_ns) noexcept;
  /// Records a monitoring failure (never throws).
  void record_monitoring_error(std::string_view source, std::string_view message) noexcept;
  /// Adds a note on how figures were obtained.
  void add_note(std::string_view note) noexcept;
  /// Attaches a run-level analysis.
  void attach(Attachment attachment) noexcept;
  /// Attaches an analysis to step `step_id` of this run, also after the step ended (what
  /// is known only later: the conditioning a denoiser receives from a text step whose
  /// encoder returned no last_hidden_state). In the run document, not in the step's live
  /// StepEnded event. False when no such step (or the run is finished or inactive).
  bool attach_to_step(int step_id, Attachment attachment) noexcept;
  /// Sets a run label.
  void label(std::string_view key, std::string_view value) noexcept;
  /// Sets the run's place in a distributed job (e.g. read from an initialised process group).
  void set_distributed(DistributedInfo info) noexcept;
  /// The run recorded so far (open steps have status "running").
  Run snapshot() const;
  /// Ends the run and returns it; open steps are closed as "failed" with a note.
  /// Finishes the run as ending at `end_steady_ns` (not before its start): a watched
  /// program's run ends when the line or exit that ends it was read.
  Run finish_at(std::int64_t end_steady_ns);
  Run finish();
  /// False for a run of a disabled monitor (steps are no-ops).
  bool active() const noexcept { return state_ != nullptr; }

 private:
  friend class Monitor;
  explicit ActiveRun(std::shared_ptr<detail::RunState> state) : state_(std::move(state)) {}
  std::shared_ptr<detail::RunState> state_;
};

/// Owns probes and the sampler; starts runs. Thread-safe.
class Monitor {
 public:
  explicit Monitor(MonitorOptions options = {});
  ~Monitor();
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;

  /// Adds a probe (e.g. an allocator probe from an integration). Takes effect for runs
  /// started afterwards.
  void add_probe(std::unique_ptr<Probe> probe);
  /// Adds a live-event sink (genscope/sink.hpp). Takes effect for runs started afterwards.
  void add_sink(std::shared_ptr<Sink> sink);
  /// Starts a run. One run at a time per monitor: starting a second while one is active
  /// throws genscope::Error("RunActive"). Atomic: of threads calling it at once, exactly one
  /// gets the run, the others RunActive.
  ActiveRun start_run(RunOptions options = {});
  /// Runtime switch: when off, new runs and steps are no-ops.
  void set_enabled(bool enabled) noexcept;
  bool enabled() const noexcept;
  const MonitorOptions& options() const noexcept;
  /// Usage statistics over every run this monitor finished (seed 003): initialisation time
  /// (model_loading steps), generations, average/total inference time, peak/current memory.
  UsageStats usage() const;

 private:
  std::shared_ptr<detail::MonitorState> state_;
};

}  // namespace genscope

/// GENSCOPE_STEP(run, kind, "name"): a step scope until the end of the enclosing block.
/// Compiles to nothing when GENSCOPE_ENABLED is 0.
#ifndef GENSCOPE_ENABLED
#define GENSCOPE_ENABLED 1
#endif
#define GENSCOPE_CONCAT_IMPL(a, b) a##b
#define GENSCOPE_CONCAT(a, b) GENSCOPE_CONCAT_IMPL(a, b)
#define GENSCOPE_STRINGIFY_IMPL(x) #x
#define GENSCOPE_STRINGIFY(x) GENSCOPE_STRINGIFY_IMPL(x)
#if GENSCOPE_ENABLED
#define GENSCOPE_STEP(run, kind, name)                                    \
  ::genscope::Step GENSCOPE_CONCAT(genscope_step_, __LINE__) = (run).step( \
      (kind), (name), __FILE__ ":" GENSCOPE_STRINGIFY(__LINE__))
#else
#define GENSCOPE_STEP(run, kind, name) static_cast<void>(0)
#endif
