// StepApplier: the one place where what was read from a watched program becomes runs and
// steps on the Monitor (docs/run.md, "Steps from output").
//
// Recognisers and the event channel describe phases ("a model started loading", "the bar
// reached 12/20", "the in-process monitor finished step 3"); the applier decides which run
// they belong to, opens and ends the core Steps, spreads iterations, merges a phase seen from
// two sides (a tqdm bar and a forwarded in-process step of the same kind) into one step, and
// finishes runs. Recognisers hold tokens, never Steps: a token whose step was ended by
// someone else (a run end, an implicit end) is simply no longer open.
//
// Runs (WatchOptions::runs): the program run opens at program_started() or with the first
// step; an announced run (run_begin) finishes the program run first (as `watch.run=startup`)
// under RunScope::kAuto, is a custom step under kProgram, and is the only kind of run under
// kAnnounced.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "genscope/monitor.hpp"
#include "genscope/run.hpp"
#include "genscope/step_tree.hpp"
#include "genscope/watch.hpp"

namespace genscope::watch {

/// Where a phase was read from.
enum class Origin {
  kOutput,     ///< A recogniser read it from the program's output.
  kEvents,     ///< The program wrote it on the event channel.
  kForwarded,  ///< An in-process genscope Monitor forwarded it on the event channel.
};

/// A run the program announced (a ComfyUI prompt, an event-channel run_begin, ...).
struct RunAnnouncement {
  std::string name;          ///< e.g. "prompt 3"; the run label watch.announcement.
  std::string announced_by;  ///< "comfyui", "events", "forwarded", "rules"
  PipelineInfo pipeline;     ///< Non-empty fields override the session's.
  std::map<std::string, std::string> labels;
};

/// How a step opened by the applier behaves.
struct OpenOptions {
  /// Ends by itself when the next step of the run opens (a phase with no end line).
  bool ends_at_next_step = false;
  /// The step's `source` (where it was read: "comfyui", "stable-diffusion.cpp:1147", ...).
  std::string source;
  /// Shared with an open step of the same kind from another origin (docs/run.md, "Merging").
  bool mergeable = true;
  /// Called just before the step ends, whoever ends it (e.g. to record the last attempt of a
  /// fallback chain); gets the token and the time of the end.
  std::function<void(int token, std::int64_t steady_ns)> before_end;
};

/// Runs and steps of a watched program.
class StepApplier {
 public:
  StepApplier(Monitor& monitor, const WatchOptions& options, WatchStats& stats);
  ~StepApplier();
  StepApplier(const StepApplier&) = delete;
  StepApplier& operator=(const StepApplier&) = delete;

  // --- runs ---------------------------------------------------------------------------------
  /// Opens the program run (once) unless the scope is kAnnounced.
  void program_started(std::int64_t steady_ns);
  /// An announced run begins (ends the current announced run first).
  void run_begin(RunAnnouncement announcement, std::int64_t steady_ns);
  /// The announced run ends (its open steps end; failed ones stay failed).
  void run_end(std::int64_t steady_ns);
  /// The program exited: open steps end (failed when it failed), the run finishes.
  void program_exited(int wait_status, std::int64_t steady_ns);
  /// The run in progress, or nullptr.
  ActiveRun* current_run() noexcept { return run_ ? &*run_ : nullptr; }
  /// True while an announced run is in progress (or its step, under kProgram).
  bool in_announced_run() const noexcept { return announced_active_; }
  /// Sets a label on the announced run in progress (on its step under RunScope::kProgram).
  void announced_label(std::string_view key, std::string_view value);
  /// Sets a label on the current run (no-op without one).
  void run_label(std::string_view key, std::string_view value);
  /// Attaches to the current run.
  void run_attach(Attachment attachment);
  /// Adds a note to the current run.
  void run_note(std::string_view note);
  /// Records a monitoring error on the current run, or on the next one when none is open.
  void monitoring_error(std::string_view source, std::string_view message);

  // --- steps --------------------------------------------------------------------------------
  /// Opens a step (the program run first, when allowed); 0 when there is no run to hold it,
  /// or when it is read from output (Origin::kOutput) and the run has 1000 such steps already
  /// (then counted in a monitoring error of source "watch": bounded run documents).
  int open(Origin origin, StepKind kind, std::string_view name, std::int64_t steady_ns,
           const OpenOptions& options = {});
  /// Ends a step. A step shared with another origin ends only when its owner ends it.
  /// `closed_by`: how the end is known (StepRecord::closed_by; "inferred:<reason>" when a
  /// recogniser ends the step because another phase began).
  void end(Origin origin, int token, std::int64_t steady_ns,
           std::string_view closed_by = kClosedExplicit);
  /// Marks a step as inferred (no line announced it; StepRecord::inferred).
  void mark_inferred(int token, std::string_view reason);
  /// When the latest step of the current run ended (steady clock, as given); 0 when none.
  std::int64_t last_end_ns() const noexcept { return last_end_ns_; }
  /// Marks a step failed (it stays open until ended).
  void fail(int token, std::string_view message, std::string_view type = {});
  /// Marks a step skipped.
  void skip(int token, std::string_view reason);
  /// True while the token's step is open.
  bool is_open(int token) const noexcept { return find_token(token) != nullptr; }
  /// The innermost open step (from `origin` only, when given); 0 when none.
  int innermost(std::optional<Origin> origin = std::nullopt) const noexcept;
  /// The innermost open step named `name` (from `origin`); 0 when none.
  int find(Origin origin, std::string_view name) const noexcept;
  /// The open step that carries `ref` (forwarded steps); 0 when none.
  int find_ref(std::string_view ref) const noexcept;
  /// Sets (replaces) the step's before-end hook (see OpenOptions::before_end).
  void set_before_end(int token, std::function<void(int, std::int64_t)> hook);
  /// Tags a step with a reference (a forwarded step's "<pid>.<monitor>:<run>:<id>").
  void set_ref(int token, std::string ref);
  /// Kind and name of an open step.
  std::optional<StepKind> kind_of(int token) const noexcept;
  /// True when a step of `kind` was opened in the current run.
  bool seen_kind(StepKind kind) const noexcept { return (seen_kinds_ >> static_cast<unsigned>(kind) & 1) != 0; }
  /// True when the step was marked failed.
  bool failed(int token) const noexcept;
  /// When the step was opened (steady clock, as given); 0 when not open.
  std::int64_t opened_at(int token) const noexcept;
  /// Records iterations with known durations.
  void iterations(Origin origin, int token, std::span<const std::int64_t> durations_ns,
                  bool inferred);
  /// Iterations recorded so far on the step by `origin`.
  std::size_t iteration_count(int token) const noexcept;
  /// The time of the step's last iteration mark (or its opening), for event iterations.
  std::int64_t last_mark(int token) const noexcept;
  void set_last_mark(int token, std::int64_t steady_ns) noexcept;
  void counter(int token, std::string_view name, double value);
  void label(int token, std::string_view key, std::string_view value);
  void attach(int token, Attachment attachment);
  void attempt(int token, Attempt attempt);
  /// Adds a step that ended already and was timed by the program (a "completed, taking 1.2s"
  /// line, a forwarded step without a begin): inside the innermost open step. Returns the
  /// core step id, -1 when not recorded.
  /// `parent_core_id` >= 0 puts it inside that (finished) step instead.
  int add_finished(Origin origin, StepRecord record, std::int64_t start_steady_ns,
                   int parent_core_id = -2);
  /// Merges a forwarded in-process step record into open step `token` and ends it
  /// (docs/run.md, "Merging").
  void merge_and_end(int token, const StepRecord& record, std::int64_t steady_ns);
  /// A forwarded record's metrics, renamed `inprocess.<name>` where the run's probes have a
  /// figure of the same name.
  std::vector<MetricFigures> forwarded_metrics(const StepRecord& record) const;

 private:
  struct OpenStep;
  OpenStep* find_token(int token) noexcept;
  const OpenStep* find_token(int token) const noexcept;
  bool ensure_run(std::int64_t steady_ns);
  void start_run(RunOptions options, std::string_view scope_label, std::int64_t steady_ns);
  /// Ends the open steps and finishes the run; `deliver` false drops it (an empty startup).
  void finish_run(std::optional<StepStatus> open_steps_status, std::string_view reason,
                  std::int64_t steady_ns, bool deliver = true);
  void end_all(std::optional<StepStatus> status, std::string_view reason, std::int64_t steady_ns);
  void close(OpenStep& step, std::int64_t steady_ns, std::string_view closed_by);
  void end_implicit(std::int64_t steady_ns);

  Monitor& monitor_;
  const WatchOptions& options_;
  WatchStats& stats_;
  std::optional<ActiveRun> run_;
  std::vector<std::string> columns_;  // the run's probe figures
  std::vector<std::unique_ptr<OpenStep>> open_;
  std::vector<std::pair<std::string, std::string>> pending_errors_;
  int next_token_ = 1;
  std::int64_t last_end_ns_ = 0;    // the latest step end in the current run
  unsigned seen_kinds_ = 0;         // kinds opened in the current run
  std::size_t output_steps_ = 0;    // steps read from output in the current run
  static constexpr std::size_t kMaxOutputSteps = 1000;
  bool program_run_done_ = false;   // the program run was started once (never reopened)
  bool announced_seen_ = false;     // an announcement was seen (kAuto: no program run since)
  bool announced_active_ = false;
  int announced_step_ = 0;          // kProgram: the step standing for the announced run
  bool exited_ = false;
};

}  // namespace genscope::watch
