// Step scopes: opening (baseline, peak reset), recording, and closing (end figures, peaks).
#include "genscope/step.hpp"

#include <algorithm>
#include <cxxabi.h>
#include <exception>
#include <limits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "core/run_state.hpp"
#include "core/step_stack.hpp"
#include "genscope/monitor.hpp"
#include "genscope/step_tree.hpp"

namespace genscope {
namespace detail {
namespace {

struct StackEntry {
  const RunState* run;
  StepState* step;
};
thread_local std::vector<StackEntry> t_open_steps;

std::string demangle(const char* name) {
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || out == nullptr) return name;
  std::string result(out);
  std::free(out);
  return result;
}

}  // namespace

void push_step(const RunState* run, StepState* step) { t_open_steps.push_back({run, step}); }

void pop_step(const RunState* run, const StepState* step) noexcept {
  for (auto it = t_open_steps.rbegin(); it != t_open_steps.rend(); ++it) {
    if (it->run == run && it->step == step) {
      t_open_steps.erase(std::next(it).base());
      return;
    }
  }
}

StepState* current_step(const RunState* run) noexcept {
  for (auto it = t_open_steps.rbegin(); it != t_open_steps.rend(); ++it) {
    if (it->run == run) return it->step;
  }
  return nullptr;
}

std::string current_step_name(const RunState* run) {
  const StepState* s = current_step(run);
  return s != nullptr ? s->record.name : std::string();
}

}  // namespace detail

// --- opening ------------------------------------------------------------------------------

Step ActiveRun::step(StepKind kind, std::string_view name, const char* source) {
  return step_at(std::numeric_limits<std::int64_t>::max(), kind, name, source);
}

Step ActiveRun::step_at(std::int64_t start_steady_ns, StepKind kind, std::string_view name,
                        const char* source) {
  if (state_ == nullptr || !state_->monitor->enabled) return Step();
  detail::RunState& run = *state_;
  try {
    auto st = std::make_unique<detail::StepState>();
    const std::size_t n = run.columns.size();
    st->sampled_peak.assign(n, kNaN);
    st->sampled_peak_offset_ns.assign(n, -1);
    st->exact_peak.assign(n, kNaN);
    st->exact_valid.assign(n, 0);
    st->before.assign(n, kNaN);

    detail::StepState* raw = st.get();
    st->start_ns = detail::steady_now_ns();  // provisional, until the baseline is taken
    {
      // The high-water marks are shared by every open step, on every thread. Reading them
      // into the open steps, resetting them and registering this step happen as one, so no
      // other thread can reset the marks between a read and this step's registration.
      // Steps already open keep their own peaks: the running marks are folded into them
      // before the reset. A top-level step skips that read.
      std::lock_guard peaks(run.peak_mutex);
      if (run.open_count.load(std::memory_order_acquire) > 0) run.fold_exact_peaks();
      run.fold_parts();  // also ends the parts' window of a top-level step's predecessor
      for (detail::RunProbe& p : run.probes) {
        if (!p.exact) continue;
        const ProbeStatus status = p.slot->reset_peaks();
        if (status.ok()) {
          for (std::size_t i = 0; i < p.count; ++i) {
            st->exact_valid[p.first + i] = p.slot->metrics()[i].exact_peak ? 1 : 0;
          }
        } else if (!p.reset_refused_noted) {
          std::lock_guard lock(run.mutex);
          p.reset_refused_noted = true;
          run.run.notes.push_back(p.slot->name() + ": " + status.error);
          run.add_error_locked(p.slot->name(), status.error, std::string(name));
        }
      }
      std::lock_guard lock(run.mutex);
      StepRecord& r = raw->record;
      r.id = static_cast<int>(run.steps.size());
      const detail::StepState* parent = detail::current_step(&run);
      r.parent_id = parent != nullptr ? parent->record.id : -1;
      r.name = std::string(name);
      r.kind = kind;
      r.status = StepStatus::kRunning;
      if (source != nullptr) r.source = source;
      r.thread = run.thread_number_locked();
      run.steps.push_back(std::move(st));
      run.open_steps.push_back(raw);
      run.open_count.fetch_add(1, std::memory_order_release);
    }
    run.monitor->wake_sampler();
    // The baseline; the step's clock starts after it, so its cost is not the step's.
    std::vector<double> before;
    run.sample_all(before);
    {
      std::lock_guard lock(run.mutex);
      const std::int64_t now = detail::steady_now_ns();
      const std::int64_t start =
          start_steady_ns == std::numeric_limits<std::int64_t>::max() ? now : start_steady_ns;
      run.push_row_locked(before, now);
      raw->before = std::move(before);
      raw->start_ns = start;
      raw->last_iteration_ns = start;
      raw->record.start_offset_ns = start - run.start_steady_ns;
      for (std::size_t c = 0; c < n; ++c) {
        const double v = raw->before[c];
        if (std::isnan(v)) continue;
        if (std::isnan(raw->sampled_peak[c]) || v >= raw->sampled_peak[c]) {
          raw->sampled_peak[c] = v;
          raw->sampled_peak_offset_ns[c] = 0;
        }
      }
    }
    detail::push_step(&run, raw);
    if (run.wants(Sink::kStepEvents)) {
      std::lock_guard lock(run.mutex);
      StepRecord began = raw->record;
      began.metrics.reserve(n);
      for (std::size_t c = 0; c < n; ++c) {
        MetricFigures m;
        m.name = run.columns[c].name;
        m.unit = run.columns[c].unit;
        m.before = raw->before[c];
        began.metrics.push_back(std::move(m));
      }
      run.sinks->post(detail::StepBeganEvent{std::move(began)});
    }
    return Step(state_, raw);
  } catch (const std::exception& e) {
    record_monitoring_error("monitor", std::string("cannot open step: ") + e.what());
    return Step();
  }
}

Step::Step(std::shared_ptr<detail::RunState> run, detail::StepState* state) noexcept
    : run_(std::move(run)), state_(state), uncaught_at_open_(std::uncaught_exceptions()) {}

Step::Step(Step&& other) noexcept
    : run_(std::move(other.run_)),
      state_(std::exchange(other.state_, nullptr)),
      uncaught_at_open_(other.uncaught_at_open_) {}

Step& Step::operator=(Step&& other) noexcept {
  if (this != &other) {
    end();
    run_ = std::move(other.run_);
    state_ = std::exchange(other.state_, nullptr);
    uncaught_at_open_ = other.uncaught_at_open_;
  }
  return *this;
}

Step::~Step() {
  if (state_ != nullptr && std::uncaught_exceptions() > uncaught_at_open_ &&
      state_->record.status != StepStatus::kFailed) {
    // The exception's text is not reachable during unwinding; run_step() records it.
    fail("an exception propagated out of the step");
  }
  end();
}

namespace {

// File-name safe: letters, digits, '-', '_' and '.' kept; anything else becomes '_'.
std::string sanitize(std::string_view name) {
  std::string out;
  for (char c : name) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_' || c == '.';
    out += keep ? c : '_';
  }
  if (out.empty() || out == "." || out == "..") out = "_" + out;
  return out.substr(0, 120);
}

}  // namespace

std::optional<Step::DumpTarget> Step::dump_target(std::string_view name,
                                                  std::string_view role) const {
  if (state_ == nullptr || run_->dumps.directory.empty()) return std::nullopt;
  const TensorDumpOptions& d = run_->dumps;
  const StepRecord& r = state_->record;
  if (!d.kinds.empty() && std::find(d.kinds.begin(), d.kinds.end(), r.kind) == d.kinds.end()) {
    return std::nullopt;
  }
  if (!d.roles.empty() && std::find(d.roles.begin(), d.roles.end(), role) == d.roles.end()) {
    return std::nullopt;
  }
  char prefix[16];
  std::snprintf(prefix, sizeof prefix, "%02d_", r.id);
  DumpTarget t;
  t.safetensors = d.safetensors;
  t.path = d.directory / (prefix + sanitize(r.name)) /
           (sanitize(name) + (d.safetensors ? ".safetensors" : ".npy"));
  t.run_id = run_->run.id;
  t.step_name = r.name;
  return t;
}

std::int64_t Step::now_ns() noexcept { return detail::steady_now_ns(); }

int Step::id() const noexcept { return state_ != nullptr ? state_->record.id : -1; }

// --- closing ------------------------------------------------------------------------------

void Step::end_as(std::string_view closed_by) noexcept {
  end_at(detail::steady_now_ns(), closed_by);
}

void Step::end_at(std::int64_t end_steady_ns, std::string_view closed_by) noexcept {
  if (state_ == nullptr) return;
  try {
    std::lock_guard lock(run_->mutex);
    state_->record.closed_by = std::string(closed_by);
  } catch (...) {
  }
  end_impl(end_steady_ns);
}

void Step::mark_inferred(std::string_view reason) noexcept {
  if (state_ == nullptr) return;
  try {
    std::lock_guard lock(run_->mutex);
    state_->record.inferred = true;
    if (!reason.empty()) state_->record.labels["inferred.reason"] = std::string(reason);
  } catch (...) {
  }
}

void Step::end() noexcept { end_impl(detail::steady_now_ns()); }

void Step::end_impl(std::int64_t end_ns) noexcept {
  if (state_ == nullptr) return;
  detail::StepState* st = std::exchange(state_, nullptr);
  std::shared_ptr<detail::RunState> run = std::move(run_);
  try {
    detail::pop_step(run.get(), st);
    {
      std::lock_guard peaks(run->peak_mutex);  // see ActiveRun::step
      run->fold_exact_peaks();
      run->fold_parts();
    }
    std::vector<double> after;
    run->sample_all(after);
    std::lock_guard lock(run->mutex);
    if (!st->open) return;  // already closed by finish()
    st->open = false;
    auto& open = run->open_steps;
    open.erase(std::remove(open.begin(), open.end(), st), open.end());
    run->open_count.fetch_sub(1, std::memory_order_release);
    st->record.iteration_ns = std::move(st->iterations);
    st->record.iterations_inferred = st->iterations_inferred;
    run->finalize_locked(*st, after, end_ns);
    run->push_row_locked(after, detail::steady_now_ns());
    if (run->wants(Sink::kStepEvents)) run->sinks->post(detail::StepEndedEvent{st->record});
    run->monitor->wake_sampler();
  } catch (...) {
    // Closing a step must never throw into the pipeline.
  }
}

// --- recording ----------------------------------------------------------------------------

void Step::fail(std::string_view message, std::string_view type) noexcept {
  if (state_ == nullptr) return;
  try {
    std::lock_guard lock(run_->mutex);
    state_->record.status = StepStatus::kFailed;
    state_->record.error_message = std::string(message);
    if (!type.empty()) state_->record.error_type = std::string(type);
  } catch (...) {
  }
}

void Step::fail_with_current_exception() noexcept {
  if (state_ == nullptr) return;
  try {
    throw;
  } catch (const std::exception& e) {
    fail(e.what(), detail::demangle(typeid(e).name()));
  } catch (...) {
    const std::type_info* t = abi::__cxa_current_exception_type();
    fail("non-standard exception", t != nullptr ? detail::demangle(t->name()) : "unknown");
  }
}

void Step::skip(std::string_view reason) noexcept {
  if (state_ == nullptr) return;
  try {
    std::lock_guard lock(run_->mutex);
    state_->record.status = StepStatus::kSkipped;
    state_->record.error_message = std::string(reason);
  } catch (...) {
  }
}

void Step::add_counter(std::string_view name, double value) noexcept {
  if (state_ == nullptr) return;
  try {
    std::lock_guard lock(run_->mutex);
    state_->record.counters[std::string(name)] += value;
  } catch (...) {
  }
}

void Step::begin_iterations() noexcept {
  if (state_ != nullptr) state_->last_iteration_ns = detail::steady_now_ns();
}

void Step::mark_iteration_slow() noexcept {
  const std::int64_t now = detail::steady_now_ns();
  const std::int64_t duration = now - state_->last_iteration_ns;
  try {
    state_->iterations.push_back(duration);
  } catch (...) {
  }
  state_->last_iteration_ns = now;
  if (run_->wants(Sink::kIterationEvents)) {
    run_->sinks->post(
        detail::IterationEvent{state_->record.id, state_->iterations.size() - 1, duration});
  }
}

void Step::record_iterations(std::span<const std::int64_t> durations_ns, bool inferred) noexcept {
  if (state_ == nullptr || durations_ns.empty()) return;
  try {
    state_->iterations.insert(state_->iterations.end(), durations_ns.begin(), durations_ns.end());
  } catch (...) {
    return;
  }
  if (inferred) state_->iterations_inferred = true;
  state_->last_iteration_ns = detail::steady_now_ns();
  if (run_->wants(Sink::kIterationEvents)) {
    std::size_t index = state_->iterations.size() - durations_ns.size();
    for (const std::int64_t d : durations_ns) {
      run_->sinks->post(detail::IterationEvent{state_->record.id, index++, d});
    }
  }
}

void Step::add_metric(MetricFigures figures) noexcept {
  if (state_ == nullptr) return;
  try {
    std::lock_guard lock(run_->mutex);
    state_->extra_metrics.push_back(std::move(figures));
  } catch (...) {
  }
}

void Step::record_attempt(std::string_view strategy, StepStatus outcome, std::string_view error,
                          std::int64_t duration_ns) noexcept {
  if (state_ == nullptr) return;
  try {
    std::lock_guard lock(run_->mutex);
    state_->record.attempts.push_back(
        Attempt{std::string(strategy), outcome, std::string(error), duration_ns});
    if (run_->wants(Sink::kAttemptEvents)) {
      run_->sinks->post(detail::AttemptEvent{state_->record.id, state_->record.attempts.back()});
    }
  } catch (...) {
  }
}

void Step::attach(Attachment attachment) noexcept {
  if (state_ == nullptr) return;
  try {
    std::lock_guard lock(run_->mutex);
    state_->record.attachments.push_back(std::move(attachment));
  } catch (...) {
  }
}

void Step::label(std::string_view key, std::string_view value) noexcept {
  if (state_ == nullptr) return;
  try {
    std::lock_guard lock(run_->mutex);
    state_->record.labels[std::string(key)] = std::string(value);
  } catch (...) {
  }
}

void Step::record_monitoring_error(std::string_view source, std::string_view message) noexcept {
  if (state_ == nullptr) return;
  try {
    std::lock_guard lock(run_->mutex);
    run_->add_error_locked(source, message, state_->record.name);
  } catch (...) {
  }
}

// --- steps timed elsewhere -----------------------------------------------------------------

int ActiveRun::add_step(StepRecord step, std::int64_t start_steady_ns) noexcept {
  if (state_ == nullptr || !state_->monitor->enabled) return -1;
  detail::RunState& run = *state_;
  try {
    std::lock_guard lock(run.mutex);
    if (run.finished) return -1;
    const int id = static_cast<int>(run.steps.size());
    if (step.parent_id < -1 || step.parent_id >= id) step.parent_id = -1;
    step.id = id;
    step.thread = run.thread_number_locked();
    step.duration_ns = std::max<std::int64_t>(0, step.duration_ns);
    step.start_offset_ns = start_steady_ns - run.start_steady_ns;
    if (step.status == StepStatus::kRunning) step.status = StepStatus::kOk;
    if (step.closed_by.empty()) step.closed_by = kClosedExplicit;
    std::vector<MetricFigures> own = std::move(step.metrics);
    step.metrics.clear();
    for (MetricFigures& m : run.sampled_figures_locked(start_steady_ns,
                                                       start_steady_ns + step.duration_ns)) {
      const bool has = std::any_of(own.begin(), own.end(),
                                   [&](const MetricFigures& o) { return o.name == m.name; });
      if (!has) step.metrics.push_back(std::move(m));
    }
    for (MetricFigures& m : own) step.metrics.push_back(std::move(m));
    auto st = std::make_unique<detail::StepState>();
    st->open = false;
    st->start_ns = start_steady_ns;
    st->record = std::move(step);
    if (run.wants(Sink::kStepEvents)) {
      StepRecord began = st->record;
      for (MetricFigures& m : began.metrics) {
        m.after = kNaN;
        m.peak = kNaN;
        m.peak_offset_ns = -1;
        m.peak_source.clear();
      }
      began.status = StepStatus::kRunning;
      began.duration_ns = 0;
      began.iteration_ns.clear();
      run.sinks->post(detail::StepBeganEvent{std::move(began)});
      run.sinks->post(detail::StepEndedEvent{st->record});
    }
    run.steps.push_back(std::move(st));
    return id;
  } catch (...) {
    return -1;
  }
}

}  // namespace genscope
