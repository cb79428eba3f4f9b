// Step: the RAII scope of one pipeline phase, and Attempt scopes for fallback chains.
#pragma once

#include <cstdint>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "genscope/run.hpp"
#include "genscope/step_kind.hpp"

namespace genscope {

namespace detail {
struct RunState;
struct StepState;
}  // namespace detail

/// A step in progress. Ends (recording end snapshots and peaks) when destroyed or on end().
/// A default-constructed or disabled Step accepts every call and records nothing.
/// A Step is used by the thread that opened it; steps on other threads are independent.
class Step {
 public:
  Step() = default;
  Step(Step&& other) noexcept;
  Step& operator=(Step&& other) noexcept;
  Step(const Step&) = delete;
  Step& operator=(const Step&) = delete;
  ~Step();

  /// Ends the step now (idempotent).
  void end() noexcept;
  /// Ends the step now and says how its end was known (StepRecord::closed_by:
  /// "explicit", "inferred:<reason>" or "run_end"; step_tree.hpp).
  void end_as(std::string_view closed_by) noexcept;
  /// Ends the step as ending at `end_steady_ns` (not before its start; e.g. when the line
  /// that ends it was read), with closed_by as for end_as(). Its figures are taken now.
  void end_at(std::int64_t end_steady_ns, std::string_view closed_by) noexcept;
  /// Marks the step itself as inferred (no line or event announced it); `reason` becomes
  /// its label `inferred.reason`.
  void mark_inferred(std::string_view reason) noexcept;
  /// Marks the step failed with a reason (and an exception type, when there is one).
  void fail(std::string_view message, std::string_view type = {}) noexcept;
  /// Marks the step failed from std::current_exception() (call inside a catch block).
  void fail_with_current_exception() noexcept;
  /// Marks the step skipped.
  void skip(std::string_view reason) noexcept;
  /// Adds `value` to a work counter (items, frames, bytes, characters, tokens, ...).
  void add_counter(std::string_view name, double value) noexcept;
  /// Restarts the iteration clock (e.g. just before the denoising loop).
  void begin_iterations() noexcept;
  /// Records one iteration: the time since the previous mark (or begin_iterations(), or the
  /// step start).
  void mark_iteration() noexcept {
    if (state_ != nullptr) mark_iteration_slow();
  }
  /// Records iterations whose durations were measured elsewhere (e.g. read from a watched
  /// program's progress bar); `inferred` marks durations that were not observed one by one.
  void record_iterations(std::span<const std::int64_t> durations_ns, bool inferred) noexcept;
  /// Adds figures measured elsewhere (e.g. by a watched program's own monitor); they are
  /// listed after the figures of this run's probes.
  void add_metric(MetricFigures figures) noexcept;
  /// Records an attempt of a fallback chain that has already finished.
  void record_attempt(std::string_view strategy, StepStatus outcome, std::string_view error,
                      std::int64_t duration_ns) noexcept;
  /// Runs `fn()` as one attempt: returns true when it returned normally, false (and records
  /// the exception's message) when it threw. Exceptions do not propagate.
  template <class F>
  bool try_attempt(std::string_view strategy, F&& fn) noexcept {
    const std::int64_t t0 = now_ns();
    try {
      fn();
    } catch (const std::exception& e) {
      record_attempt(strategy, StepStatus::kFailed, e.what(), now_ns() - t0);
      return false;
    } catch (...) {
      record_attempt(strategy, StepStatus::kFailed, "unknown exception", now_ns() - t0);
      return false;
    }
    record_attempt(strategy, StepStatus::kOk, {}, now_ns() - t0);
    return true;
  }
  /// Attaches an analysis (tensor statistics, model snapshot, LoRA report, ...).
  void attach(Attachment attachment) noexcept;
  /// Sets a free-form label on the step.
  void label(std::string_view key, std::string_view value) noexcept;
  /// Records a monitoring failure against this step.
  void record_monitoring_error(std::string_view source, std::string_view message) noexcept;
  /// Where a tensor of this step is dumped, when the run's TensorDumpOptions select it.
  struct DumpTarget {
    std::filesystem::path path;  ///< <dir>/<NN>_<step>/<tensor>.npy|.safetensors
    bool safetensors = false;
    std::string run_id;
    std::string step_name;
  };
  /// The dump target of tensor `name` with role `role`; nullopt when not dumped.
  std::optional<DumpTarget> dump_target(std::string_view name, std::string_view role) const;
  /// True when this step records (monitor enabled, step not ended).
  bool active() const noexcept { return state_ != nullptr; }
  /// The step id within its run; -1 when inactive.
  int id() const noexcept;
  /// Monotonic clock in nanoseconds (steady_clock).
  static std::int64_t now_ns() noexcept;

 private:
  friend class ActiveRun;
  Step(std::shared_ptr<detail::RunState> run, detail::StepState* state) noexcept;
  void mark_iteration_slow() noexcept;
  void end_impl(std::int64_t end_ns) noexcept;
  std::shared_ptr<detail::RunState> run_;
  detail::StepState* state_ = nullptr;
  int uncaught_at_open_ = 0;
};

}  // namespace genscope
