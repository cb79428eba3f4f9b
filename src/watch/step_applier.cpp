// StepApplier: runs and steps of a watched program (see step_applier.hpp).
#include "watch/step_applier.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "genscope/step.hpp"

namespace genscope::watch {

struct StepApplier::OpenStep {
  int token = 0;
  Step step;
  StepKind kind = StepKind::kCustom;
  std::string name;
  Origin origin = Origin::kOutput;
  std::string ref;
  bool ends_at_next_step = false;
  bool mergeable = true;
  bool shared_with_output = false;   // an output recogniser reads the same phase
  bool failed = false;
  std::function<void(int, std::int64_t)> before_end;
  std::int64_t opened_ns = 0;
  std::int64_t last_mark_ns = 0;
  std::size_t owner_iterations = 0;   // recorded by the owning origin
  std::size_t output_iterations = 0;  // recorded from output before another origin took over
  std::vector<std::int64_t> output_buffer;  // output iterations of a shared step
  bool output_buffer_inferred = false;
};

namespace {

constexpr std::size_t kMaxPendingErrors = 64;

std::string exit_text(int wait_status) {
  if (WIFEXITED(wait_status)) return "status " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    const char* name = sigabbrev_np(sig);
    return "signal " + std::to_string(sig) + (name != nullptr ? std::string(" (SIG") + name + ")" : "");
  }
  return "wait status " + std::to_string(wait_status);
}

bool exited_ok(int wait_status) {
  return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
}

}  // namespace

StepApplier::StepApplier(Monitor& monitor, const WatchOptions& options, WatchStats& stats)
    : monitor_(monitor), options_(options), stats_(stats) {}

StepApplier::~StepApplier() {
  try {
    if (run_) {
      run_note("the watch session ended before the program did");
      finish_run(StepStatus::kFailed, "the watch session ended while the step was open", Step::now_ns());
    }
  } catch (...) {
  }
}

// --- runs ------------------------------------------------------------------------------------

void StepApplier::start_run(RunOptions options, std::string_view scope_label, std::int64_t steady_ns) {
  options.labels["watch.run"] = std::string(scope_label);
  options.start_steady_ns = steady_ns;
  run_.emplace(monitor_.start_run(std::move(options)));
  columns_ = run_->snapshot().series.metrics;
  for (auto& [source, message] : pending_errors_) run_->record_monitoring_error(source, message);
  pending_errors_.clear();
}

bool StepApplier::ensure_run(std::int64_t steady_ns) {
  if (run_) return true;
  if (exited_) return false;
  if (options_.runs == RunScope::kAnnounced) return false;
  if (options_.runs == RunScope::kAuto && announced_seen_) return false;
  if (program_run_done_) return false;
  program_started(steady_ns);
  return run_.has_value();
}

void StepApplier::program_started(std::int64_t steady_ns) {
  if (run_ || program_run_done_ || exited_ || options_.runs == RunScope::kAnnounced) return;
  if (options_.runs == RunScope::kAuto && announced_seen_) return;
  program_run_done_ = true;
  try {
    start_run(options_.run, "program", steady_ns);
  } catch (const std::exception& e) {
    // A run already active on this monitor (started by the caller): nothing to record into.
    pending_errors_.emplace_back("watch", std::string("cannot start the program run: ") + e.what());
  }
}

void StepApplier::run_begin(RunAnnouncement a, std::int64_t steady_ns) {
  if (exited_) return;
  if (options_.runs == RunScope::kProgram) {
    if (!ensure_run(steady_ns)) return;
    if (announced_step_ != 0) end(Origin::kEvents, announced_step_, steady_ns);
    OpenOptions o;
    o.source = a.announced_by;
    o.mergeable = false;
    announced_step_ = open(Origin::kEvents, StepKind::kCustom,
                           a.name.empty() ? std::string_view("run") : std::string_view(a.name),
                           steady_ns, o);
    for (const auto& [k, v] : a.labels) label(announced_step_, k, v);
    announced_active_ = announced_step_ != 0;
    return;
  }
  if (run_) {
    if (announced_active_) {
      run_note("ended by the next announced run, without an end of its own");
      finish_run(StepStatus::kOk, {}, steady_ns);
    } else {
      // What came before the first announcement is the startup run, unless nothing
      // happened in it: a server's start-up with no step is not a run of its own.
      const Run so_far = run_->snapshot();
      const bool empty = so_far.steps.empty() && so_far.monitoring_errors.empty();
      run_label("watch.run", "startup");
      finish_run(StepStatus::kOk, {}, steady_ns, /*deliver=*/!empty);
    }
  }
  announced_seen_ = true;
  RunOptions options = options_.run;
  if (!a.pipeline.name.empty()) options.pipeline.name = a.pipeline.name;
  if (!a.pipeline.model.empty()) options.pipeline.model = a.pipeline.model;
  if (!a.pipeline.architecture.empty()) options.pipeline.architecture = a.pipeline.architecture;
  for (auto& [k, v] : a.pipeline.parameters) options.pipeline.parameters[k] = v;
  for (auto& [k, v] : a.labels) options.labels[k] = v;
  if (!a.name.empty()) options.labels["watch.announcement"] = a.name;
  if (!a.announced_by.empty()) options.labels["watch.announced_by"] = a.announced_by;
  try {
    start_run(std::move(options), "announced", steady_ns);
    announced_active_ = true;
  } catch (const std::exception& e) {
    pending_errors_.emplace_back("watch", std::string("cannot start an announced run: ") + e.what());
  }
}

void StepApplier::run_end(std::int64_t steady_ns) {
  if (options_.runs == RunScope::kProgram) {
    if (announced_step_ != 0) end(Origin::kEvents, announced_step_, steady_ns);
    announced_step_ = 0;
    announced_active_ = false;
    return;
  }
  if (!announced_active_ || !run_) return;
  finish_run(StepStatus::kOk, {}, steady_ns);
}

void StepApplier::program_exited(int wait_status, std::int64_t steady_ns) {
  if (exited_) return;
  exited_ = true;
  if (!run_) return;
  const bool ok = exited_ok(wait_status);
  const std::string text = exit_text(wait_status);
  run_label("watch.exit", text);
  if (announced_active_) run_note("the program exited before the announced run ended");
  finish_run(ok ? StepStatus::kOk : StepStatus::kFailed,
             ok ? std::string_view{} : std::string_view("the program ended (" + text + ") while the step was open"),
             steady_ns);
}

void StepApplier::finish_run(std::optional<StepStatus> status, std::string_view reason,
                             std::int64_t steady_ns, bool deliver) {
  end_all(status, reason, steady_ns);
  seen_kinds_ = 0;
  last_end_ns_ = 0;
  output_steps_ = 0;
  announced_active_ = false;
  announced_step_ = 0;
  if (!run_) return;
  const bool recorded = run_->active();  // false when the monitor is disabled
  Run result = run_->finish_at(steady_ns);
  run_.reset();
  columns_.clear();
  if (!recorded || !deliver) return;
  ++stats_.runs_finished;
  if (options_.on_run_finished) {
    try {
      options_.on_run_finished(std::move(result));
    } catch (...) {
      ++stats_.callback_errors;
    }
  }
}

void StepApplier::announced_label(std::string_view key, std::string_view value) {
  if (!announced_active_) return;
  if (options_.runs == RunScope::kProgram) {
    label(announced_step_, key, value);
  } else {
    run_label(key, value);
  }
}

void StepApplier::run_label(std::string_view key, std::string_view value) {
  if (run_) run_->label(key, value);
}

void StepApplier::run_attach(Attachment attachment) {
  if (run_) run_->attach(std::move(attachment));
}

void StepApplier::run_note(std::string_view note) {
  if (run_) run_->add_note(note);
}

void StepApplier::monitoring_error(std::string_view source, std::string_view message) {
  if (run_) {
    run_->record_monitoring_error(source, message);
  } else if (pending_errors_.size() < kMaxPendingErrors) {
    pending_errors_.emplace_back(std::string(source), std::string(message));
  }
}

// --- steps -----------------------------------------------------------------------------------

StepApplier::OpenStep* StepApplier::find_token(int token) noexcept {
  for (auto& s : open_) {
    if (s->token == token) return s.get();
  }
  return nullptr;
}

const StepApplier::OpenStep* StepApplier::find_token(int token) const noexcept {
  for (const auto& s : open_) {
    if (s->token == token) return s.get();
  }
  return nullptr;
}

void StepApplier::end_implicit(std::int64_t steady_ns) {
  // Innermost first, so the stack of the session thread unwinds in order.
  for (auto it = open_.rbegin(); it != open_.rend();) {
    if ((*it)->ends_at_next_step) {
      close(**it, steady_ns, "inferred:next step");
      it = decltype(it)(open_.erase(std::next(it).base()));
    } else {
      ++it;
    }
  }
}

int StepApplier::open(Origin origin, StepKind kind, std::string_view name, std::int64_t steady_ns,
                      const OpenOptions& options) {
  if (!ensure_run(steady_ns)) {
    ++stats_.steps_outside_runs;
    return 0;
  }
  if (options.mergeable && kind != StepKind::kCustom) {
    // One phase seen from two sides is one step (docs/run.md, "Merging").
    for (auto it = open_.rbegin(); it != open_.rend(); ++it) {
      OpenStep& s = **it;
      if (s.kind != kind || !s.mergeable || s.ends_at_next_step) continue;
      if (origin == Origin::kOutput && s.origin != Origin::kOutput && !s.shared_with_output) {
        s.shared_with_output = true;
        return s.token;
      }
      if (origin != Origin::kOutput && s.origin == Origin::kOutput && !s.shared_with_output) {
        s.origin = origin;
        s.shared_with_output = true;
        s.output_iterations = s.owner_iterations;
        s.owner_iterations = 0;
        if (s.name != name) s.step.label(origin == Origin::kForwarded ? "inprocess.name" : "event.name", name);
        return s.token;
      }
    }
  }
  if (origin == Origin::kOutput && output_steps_ >= kMaxOutputSteps) {
    // Bounded run documents: 100k progress bars are not 100k steps. Further steps read from
    // output are counted (the message's "repeated N times"), not recorded.
    run_->record_monitoring_error(
        "watch", "more than " + std::to_string(kMaxOutputSteps) +
                     " steps read from output in this run: further ones (progress bars, "
                     "matched lines) are counted here, not recorded as steps");
    return 0;
  }
  end_implicit(steady_ns);
  auto s = std::make_unique<OpenStep>();
  s->step = run_->step_at(steady_ns, kind, name, options.source.empty() ? nullptr : options.source.c_str());
  if (!s->step.active()) return 0;
  s->token = next_token_++;
  s->kind = kind;
  s->name = std::string(name);
  s->origin = origin;
  s->ends_at_next_step = options.ends_at_next_step;
  s->mergeable = options.mergeable;
  s->before_end = options.before_end;
  s->opened_ns = steady_ns;
  seen_kinds_ |= 1u << static_cast<unsigned>(kind);
  if (origin == Origin::kOutput) ++output_steps_;
  s->last_mark_ns = steady_ns;
  const int token = s->token;
  open_.push_back(std::move(s));
  return token;
}

void StepApplier::close(OpenStep& s, std::int64_t steady_ns, std::string_view closed_by) {
  if (s.before_end) {
    auto hook = std::move(s.before_end);
    s.before_end = nullptr;
    try {
      hook(s.token, steady_ns);
    } catch (...) {
    }
  }
  if (s.shared_with_output && !s.output_buffer.empty()) {
    if (s.owner_iterations == 0) {
      s.step.record_iterations(s.output_buffer, s.output_buffer_inferred);
    } else {
      s.step.label("watch.duplicate_iterations",
                   std::to_string(s.output_buffer.size()) + " iterations read from the output "
                   "were not recorded: the step's owner recorded its own");
    }
    s.output_buffer.clear();
  }
  s.step.end_at(steady_ns, closed_by);
  last_end_ns_ = std::max(last_end_ns_, steady_ns);
}

void StepApplier::end(Origin origin, int token, std::int64_t steady_ns,
                      std::string_view closed_by) {
  for (auto it = open_.begin(); it != open_.end(); ++it) {
    OpenStep& s = **it;
    if (s.token != token) continue;
    if (origin == Origin::kOutput && s.origin != Origin::kOutput) return;  // owner ends it
    close(s, steady_ns, closed_by);
    open_.erase(it);
    return;
  }
}

void StepApplier::end_all(std::optional<StepStatus> status, std::string_view reason,
                          std::int64_t steady_ns) {
  while (!open_.empty()) {
    OpenStep& s = *open_.back();
    if (status == StepStatus::kFailed && !s.failed) {
      s.step.fail(reason);
      s.failed = true;
    }
    close(s, steady_ns, kClosedRunEnd);
    open_.pop_back();
  }
}

void StepApplier::fail(int token, std::string_view message, std::string_view type) {
  if (OpenStep* s = find_token(token)) {
    s->step.fail(message, type);
    s->failed = true;
  }
}

void StepApplier::mark_inferred(int token, std::string_view reason) {
  if (OpenStep* s = find_token(token)) s->step.mark_inferred(reason);
}

void StepApplier::skip(int token, std::string_view reason) {
  if (OpenStep* s = find_token(token)) s->step.skip(reason);
}

int StepApplier::innermost(std::optional<Origin> origin) const noexcept {
  for (auto it = open_.rbegin(); it != open_.rend(); ++it) {
    if (!origin || (*it)->origin == *origin) return (*it)->token;
  }
  return 0;
}

int StepApplier::find(Origin origin, std::string_view name) const noexcept {
  for (auto it = open_.rbegin(); it != open_.rend(); ++it) {
    if ((*it)->origin == origin && (*it)->name == name) return (*it)->token;
  }
  return 0;
}

int StepApplier::find_ref(std::string_view ref) const noexcept {
  if (ref.empty()) return 0;
  for (auto it = open_.rbegin(); it != open_.rend(); ++it) {
    if ((*it)->ref == ref) return (*it)->token;
  }
  return 0;
}

void StepApplier::set_before_end(int token, std::function<void(int, std::int64_t)> hook) {
  if (OpenStep* s = find_token(token)) s->before_end = std::move(hook);
}

void StepApplier::set_ref(int token, std::string ref) {
  if (OpenStep* s = find_token(token)) s->ref = std::move(ref);
}

std::optional<StepKind> StepApplier::kind_of(int token) const noexcept {
  if (const OpenStep* s = find_token(token)) return s->kind;
  return std::nullopt;
}

bool StepApplier::failed(int token) const noexcept {
  const OpenStep* s = find_token(token);
  return s != nullptr && s->failed;
}

std::int64_t StepApplier::opened_at(int token) const noexcept {
  const OpenStep* s = find_token(token);
  return s != nullptr ? s->opened_ns : 0;
}

void StepApplier::iterations(Origin origin, int token, std::span<const std::int64_t> durations,
                             bool inferred) {
  OpenStep* s = find_token(token);
  if (s == nullptr || durations.empty()) return;
  if (origin == Origin::kOutput && s->origin != Origin::kOutput) {
    // A shared step: the owner's own iterations win; these are kept in case it has none.
    s->output_buffer.insert(s->output_buffer.end(), durations.begin(), durations.end());
    s->output_buffer_inferred = s->output_buffer_inferred || inferred;
    return;
  }
  s->step.record_iterations(durations, inferred);
  s->owner_iterations += durations.size();
}

std::size_t StepApplier::iteration_count(int token) const noexcept {
  const OpenStep* s = find_token(token);
  return s != nullptr ? s->owner_iterations + s->output_buffer.size() : 0;
}

std::int64_t StepApplier::last_mark(int token) const noexcept {
  const OpenStep* s = find_token(token);
  return s != nullptr ? s->last_mark_ns : 0;
}

void StepApplier::set_last_mark(int token, std::int64_t steady_ns) noexcept {
  if (OpenStep* s = find_token(token)) s->last_mark_ns = steady_ns;
}

void StepApplier::counter(int token, std::string_view name, double value) {
  if (OpenStep* s = find_token(token)) s->step.add_counter(name, value);
}

void StepApplier::label(int token, std::string_view key, std::string_view value) {
  if (OpenStep* s = find_token(token)) s->step.label(key, value);
}

void StepApplier::attach(int token, Attachment attachment) {
  if (OpenStep* s = find_token(token)) s->step.attach(std::move(attachment));
}

void StepApplier::attempt(int token, Attempt a) {
  if (OpenStep* s = find_token(token)) {
    s->step.record_attempt(a.strategy, a.outcome, a.error, a.duration_ns);
  }
}

int StepApplier::add_finished(Origin /*origin*/, StepRecord record, std::int64_t start_steady_ns,
                              int parent_core_id) {
  if (!ensure_run(start_steady_ns + record.duration_ns)) {
    ++stats_.steps_outside_runs;
    return -1;
  }
  end_implicit(start_steady_ns + record.duration_ns);
  record.parent_id = parent_core_id >= -1 ? parent_core_id
                     : open_.empty()      ? -1
                                          : open_.back()->step.id();
  last_end_ns_ = std::max(last_end_ns_, start_steady_ns + record.duration_ns);
  return run_->add_step(std::move(record), start_steady_ns);
}

std::vector<MetricFigures> StepApplier::forwarded_metrics(const StepRecord& record) const {
  std::vector<MetricFigures> out;
  out.reserve(record.metrics.size());
  for (const MetricFigures& m : record.metrics) {
    MetricFigures copy = m;
    if (std::find(columns_.begin(), columns_.end(), m.name) != columns_.end()) {
      copy.name = "inprocess." + m.name;
    }
    out.push_back(std::move(copy));
  }
  return out;
}

void StepApplier::merge_and_end(int token, const StepRecord& r, std::int64_t steady_ns) {
  OpenStep* s = find_token(token);
  if (s == nullptr) return;
  Step& step = s->step;
  for (const auto& [name, value] : r.counters) step.add_counter(name, value);
  for (const auto& [key, value] : r.labels) step.label(key, value);
  for (const Attachment& a : r.attachments) step.attach(a);
  for (const Attempt& a : r.attempts) step.record_attempt(a.strategy, a.outcome, a.error, a.duration_ns);
  for (MetricFigures& m : forwarded_metrics(r)) step.add_metric(std::move(m));
  if (!r.iteration_ns.empty()) {
    if (s->output_iterations == 0) {
      step.record_iterations(r.iteration_ns, r.iterations_inferred);
      s->owner_iterations += r.iteration_ns.size();
    } else {
      step.label("watch.duplicate_iterations",
                 std::to_string(r.iteration_ns.size()) + " in-process iterations were not "
                 "recorded: the output had given this step's iterations already");
    }
  }
  if (s->name != r.name) step.label("inprocess.name", r.name);
  step.label("inprocess.duration_ns", std::to_string(r.duration_ns));
  if (!r.source.empty()) step.label("inprocess.source", r.source);
  if (r.status == StepStatus::kFailed) {
    fail(token, r.error_message, r.error_type);
  } else if (r.status == StepStatus::kSkipped) {
    step.skip(r.error_message);
  }
  s->origin = Origin::kForwarded;
  end(Origin::kForwarded, token, steady_ns);
}

}  // namespace genscope::watch
