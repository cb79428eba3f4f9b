// Monitor and ActiveRun: probe ownership, run lifecycle and step opening.
#include "genscope/monitor.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <random>

#include "core/option_sinks.hpp"
#include "core/run_state.hpp"
#include "core/step_stack.hpp"
#include "core/utc_time.hpp"
#include "genscope/step_tree.hpp"
#include "genscope/error.hpp"
#include "genscope/host.hpp"
#include "genscope/version.hpp"

namespace genscope {
namespace {

std::string random_run_id() {
  std::random_device rd;
  std::uniform_int_distribution<std::uint64_t> dist;
  std::mt19937_64 gen((static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^
                      static_cast<std::uint64_t>(detail::steady_now_ns()));
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(dist(gen)),
                static_cast<unsigned long long>(dist(gen)));
  return buf;
}

constexpr std::chrono::milliseconds kSystemSeriesPeriod{100};

bool env_disabled() {
  const char* v = std::getenv("GENSCOPE_DISABLE");
  return v != nullptr && *v != '\0' && std::string_view(v) != "0";
}

}  // namespace

// --- Monitor ------------------------------------------------------------------------------

Monitor::Monitor(MonitorOptions options) : state_(std::make_shared<detail::MonitorState>()) {
  options.sample_interval = std::max(options.sample_interval, std::chrono::microseconds(1000));
  state_->options = options;
  state_->enabled = options.enabled && !env_disabled();
  state_->sink_list = detail::make_option_sinks(options);
  const auto timeout = options.probe_timeout;
  if (options.process_probe) {
    state_->probes.push_back(std::make_shared<detail::ProbeSlot>(make_process_probe(), timeout));
  }
  if (options.system_probe) {
    // Machine-wide figures with sampled peaks only: the sampler re-reads /proc/meminfo every
    // 100 ms, not at every sample. At 10 ms that read is ~35 % of a sample's CPU on a VM, where
    // every wake-up finds the caches cold (docs/performance.md, "The sampler at 10 ms").
    auto slot = std::make_shared<detail::ProbeSlot>(make_system_probe(), timeout);
    slot->set_series_period(kSystemSeriesPeriod);
    state_->probes.push_back(std::move(slot));
  }
  if (options.nvml_probe) {
    state_->probes.push_back(
        std::make_shared<detail::ProbeSlot>(make_nvml_probe(options.nvml_library), timeout));
  }
}

Monitor::~Monitor() { state_->stop_sampler(); }

void Monitor::add_probe(std::unique_ptr<Probe> probe) {
  if (probe == nullptr) return;
  auto slot = std::make_shared<detail::ProbeSlot>(std::move(probe), state_->options.probe_timeout);
  std::lock_guard lock(state_->mutex);
  state_->probes.push_back(std::move(slot));
}

void Monitor::add_sink(std::shared_ptr<Sink> sink) {
  if (sink == nullptr) return;
  std::lock_guard lock(state_->mutex);
  state_->sink_list.push_back(std::move(sink));
}

void Monitor::set_enabled(bool enabled) noexcept { state_->enabled = enabled; }
bool Monitor::enabled() const noexcept { return state_->enabled; }
const MonitorOptions& Monitor::options() const noexcept { return state_->options; }
UsageStats Monitor::usage() const { return state_->usage.stats(); }

ActiveRun Monitor::start_run(RunOptions options) {
  if (!state_->enabled) return ActiveRun();
  std::vector<std::shared_ptr<detail::ProbeSlot>> slots;
  std::shared_ptr<detail::SinkDispatcher> dispatcher;
  unsigned sink_mask = 0;
  {
    std::lock_guard lock(state_->mutex);
    if (auto active = state_->active_run.lock(); active != nullptr) {
      std::lock_guard run_lock(active->mutex);
      if (!active->finished) {
        throw Error("RunActive", "a run is already active on this monitor (run " +
                                     active->run.id + "); finish it first");
      }
    }
    if (state_->run_starting)
      throw Error("RunActive", "a run is being started on this monitor by another thread");
    state_->run_starting = true;
    slots = state_->probes;
    if (!state_->sink_list.empty() || state_->dispatcher != nullptr) {
      if (state_->dispatcher == nullptr) {
        state_->dispatcher =
            std::make_shared<detail::SinkDispatcher>(state_->options.sink_queue_capacity);
        state_->dispatcher->set_stop_timeout(state_->options.sink_timeout);
      }
      dispatcher = state_->dispatcher;
      sink_mask = dispatcher->set_sinks(state_->sink_list);
    }
  }

  // Until the run is published (or this start fails), others see a run being started.
  struct StartingGuard {
    detail::MonitorState& monitor;
    bool published = false;
    ~StartingGuard() {
      if (published) return;
      std::lock_guard lock(monitor.mutex);
      monitor.run_starting = false;
    }
  } starting{*state_};
  std::vector<std::pair<std::string, std::string>> open_errors;
  std::vector<detail::RunProbe> probes;
  std::vector<MetricInfo> columns;
  std::vector<GpuInfo> gpus;
  std::vector<std::string> opened;
  std::vector<AbsentProbe> absent;
  for (const auto& slot : slots) {
    const ProbeStatus status = slot->open();
    if (status.absent) {
      absent.push_back({slot->name(), status.error});
      continue;
    }
    if (!status.ok()) {
      open_errors.emplace_back(slot->name(), "probe unavailable: " + status.error);
      continue;
    }
    detail::RunProbe p;
    p.slot = slot;
    p.first = columns.size();
    p.count = slot->metrics().size();
    p.exact = slot->has_exact_peaks();
    p.parts = slot->has_parts();
    p.period_ns = slot->series_period().count();
    columns.insert(columns.end(), slot->metrics().begin(), slot->metrics().end());
    for (GpuInfo& g : slot->gpus()) gpus.push_back(std::move(g));
    opened.push_back(slot->name());
    probes.push_back(std::move(p));
  }

  auto run = std::make_shared<detail::RunState>(columns.size(), state_->options.series_capacity);
  run->monitor = state_;
  run->probes = std::move(probes);
  run->columns = std::move(columns);
  if (sink_mask != 0) {
    run->sinks = std::move(dispatcher);
    run->sink_mask = sink_mask;
  }
  Run& r = run->run;
  r.id = random_run_id();
  r.start_unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  r.start_utc = detail::format_utc_iso8601(r.start_unix_ns);
  r.genscope_version = version();
  std::call_once(state_->host_once, [this] { state_->host = read_host_info(); });
  r.host = state_->host;
  r.gpus = std::move(gpus);
  r.pipeline = std::move(options.pipeline);
  r.labels = std::move(options.labels);
  std::string distributed_problem;
  r.distributed = options.distributed ? std::move(options.distributed)
                                      : distributed_from_environment(&distributed_problem);
  if (r.distributed && r.distributed->pid == 0) r.distributed->pid = static_cast<int>(::getpid());
  if (!distributed_problem.empty())
    open_errors.emplace_back("distributed", distributed_problem + "; the run is not marked as a rank");
  run->dumps = std::move(options.dumps);
  r.probes = std::move(opened);
  r.absent_probes = std::move(absent);
  r.series.interval_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(state_->options.sample_interval).count();
  const std::int64_t max_interval_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(state_->options.max_sample_interval)
          .count();
  if (max_interval_ns > r.series.interval_ns) r.series.max_interval_ns = max_interval_ns;
  if (!state_->options.sampler) r.notes.push_back("sampler disabled: peaks are exact or endpoints");
  run->start_steady_ns = options.start_steady_ns != 0 ? options.start_steady_ns : detail::steady_now_ns();
  {
    std::lock_guard lock(run->mutex);
    if (run->sinks != nullptr) {
      run->sinks->set_run_start(run->start_steady_ns);
      if (run->wants(Sink::kRunEvents)) {
        run->sinks->post(detail::RunStartedEvent{run->snapshot_locked()});
      }
    }
    for (auto& [source, message] : open_errors) run->add_error_locked(source, message, {});
  }
  {
    std::lock_guard lock(state_->mutex);
    state_->active_run = run;
    state_->run_starting = false;
    starting.published = true;
  }
  if (state_->options.sampler) state_->start_sampler(run);
  return ActiveRun(run);
}

// --- ActiveRun ----------------------------------------------------------------------------

ActiveRun::ActiveRun(ActiveRun&&) noexcept = default;
ActiveRun& ActiveRun::operator=(ActiveRun&& other) noexcept {
  if (this != &other) {
    if (state_ != nullptr) finish();
    state_ = std::move(other.state_);
  }
  return *this;
}
ActiveRun::~ActiveRun() {
  if (state_ != nullptr) {
    try {
      finish();
    } catch (...) {
    }
  }
}

void ActiveRun::record_monitoring_error(std::string_view source,
                                        std::string_view message) noexcept {
  if (state_ == nullptr) return;
  try {
    std::lock_guard lock(state_->mutex);
    state_->add_error_locked(source, message, detail::current_step_name(state_.get()));
  } catch (...) {
  }
}

void ActiveRun::add_note(std::string_view note) noexcept {
  if (state_ == nullptr) return;
  try {
    std::lock_guard lock(state_->mutex);
    state_->run.notes.emplace_back(note);
  } catch (...) {
  }
}

void ActiveRun::attach(Attachment attachment) noexcept {
  if (state_ == nullptr) return;
  try {
    std::lock_guard lock(state_->mutex);
    state_->run.attachments.push_back(std::move(attachment));
  } catch (...) {
  }
}

bool ActiveRun::attach_to_step(int step_id, Attachment attachment) noexcept {
  if (state_ == nullptr) return false;
  try {
    std::lock_guard lock(state_->mutex);
    if (state_->finished || step_id < 0 ||
        static_cast<std::size_t>(step_id) >= state_->steps.size()) {
      return false;
    }
    StepRecord& record = state_->steps[static_cast<std::size_t>(step_id)]->record;
    if (record.id != step_id) return false;
    record.attachments.push_back(std::move(attachment));
    return true;
  } catch (...) {
    return false;
  }
}

void ActiveRun::label(std::string_view key, std::string_view value) noexcept {
  if (state_ == nullptr) return;
  try {
    std::lock_guard lock(state_->mutex);
    state_->run.labels[std::string(key)] = std::string(value);
  } catch (...) {
  }
}

void ActiveRun::set_distributed(DistributedInfo info) noexcept {
  if (state_ == nullptr) return;
  try {
    std::lock_guard lock(state_->mutex);
    if (info.pid == 0) info.pid = static_cast<int>(::getpid());
    state_->run.distributed = std::move(info);
  } catch (...) {
  }
}

Run ActiveRun::snapshot() const {
  if (state_ == nullptr) return Run{};
  std::lock_guard lock(state_->mutex);
  return state_->snapshot_locked();
}

Run ActiveRun::finish() { return finish_at(detail::steady_now_ns()); }

Run ActiveRun::finish_at(std::int64_t end_steady_ns) {
  if (state_ == nullptr) return Run{};
  std::shared_ptr<detail::RunState> run = std::move(state_);
  const std::int64_t end = std::max(end_steady_ns, run->start_steady_ns);
  {
    std::lock_guard lock(run->monitor->mutex);
    if (run->monitor->sampled_run == run) run->monitor->sampled_run = nullptr;
  }
  Run result;
  {
    std::lock_guard lock(run->mutex);
    run->finished = true;
    std::vector<double> none(run->columns.size(), kNaN);
    for (detail::StepState* s : run->open_steps) {
      s->record.status = StepStatus::kFailed;
      if (s->record.error_message.empty()) {
        s->record.error_message = "step was still open when the run finished";
      }
      s->open = false;
      s->record.closed_by = kClosedRunEnd;
      run->finalize_locked(*s, none, end);
      if (run->wants(Sink::kStepEvents)) run->sinks->post(detail::StepEndedEvent{s->record});
    }
    run->open_steps.clear();
    run->run.duration_ns = end - run->start_steady_ns;
    result = run->take_finished_locked();
  }
  normalize_step_tree(result);  // whatever gave the steps (docs/run-schema.md, "The step tree")
  try {
    detail::MonitorState& m = *run->monitor;
    m.usage.set_device(result.gpus.empty() ? "cpu" : result.gpus.front().name);
    m.usage.record_run(result);
    result.attachments.push_back({"usage", "", m.usage.to_json()});
  } catch (const std::exception& e) {
    result.monitoring_errors.push_back({"usage", e.what(), result.duration_ns, {}});
  }
  if (run->sinks != nullptr) {
    // Every sink sees the finished run before finish() returns (the history recorder must
    // have written it), unless one is stuck: then the run goes on without it.
    const auto timeout = run->monitor->options.sink_timeout;
    const bool delivered =
        run->sinks->post_and_wait(detail::RunFinishedEvent{result}, timeout);
    for (MonitoringError& e : run->sinks->take_errors()) {
      e.offset_ns = std::min(e.offset_ns, result.duration_ns);
      result.monitoring_errors.push_back(std::move(e));
    }
    if (!delivered) {
      result.monitoring_errors.push_back(
          {"sinks",
           "a sink did not take the finished run within " + std::to_string(timeout.count()) +
               " ms; it was returned without waiting further",
           result.duration_ns,
           {}});
    }
  }
  return result;
}

}  // namespace genscope
