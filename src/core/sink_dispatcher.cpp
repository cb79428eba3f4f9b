// SinkDispatcher: the bounded event queue and the thread that delivers it to the sinks.
#include "core/sink_dispatcher.hpp"

#include <atomic>
#include <exception>

namespace genscope::detail {

std::int64_t steady_now_ns() noexcept;

struct SinkDispatcher::State {
  std::mutex mutex;
  std::condition_variable wake;       // the thread: an event or stop
  std::condition_variable delivered;  // post_and_wait and the destructor
  std::deque<std::pair<std::uint64_t, SinkEvent>> queue;
  std::vector<std::shared_ptr<Sink>> sinks;
  std::atomic<unsigned> mask{0};
  std::size_t capacity = 0;
  std::uint64_t posted = 0;
  std::uint64_t done = 0;
  std::uint64_t dropped = 0;
  std::int64_t run_start_ns = 0;
  bool stop = false;
  bool exited = false;
  std::chrono::milliseconds stop_timeout{10'000};
  // Errors raised by sinks: (source, message) -> count, in first-seen order.
  std::vector<MonitoringError> errors;
  std::map<std::pair<std::string, std::string>, int> error_counts;

  void add_error(const std::string& source, const std::string& message) {
    std::lock_guard lock(mutex);
    auto key = std::make_pair(source, message);
    if (error_counts[key]++ > 0) return;
    errors.push_back({source, message, steady_now_ns() - run_start_ns, {}});
  }
};

namespace {

// Calls the sink's handler for one event, when the sink subscribed to its group.
struct Deliver {
  Sink& sink;
  unsigned mask;
  void operator()(const RunStartedEvent& e) const {
    if (mask & Sink::kRunEvents) sink.run_started(e.run);
  }
  void operator()(const StepBeganEvent& e) const {
    if (mask & Sink::kStepEvents) sink.step_began(e.step);
  }
  void operator()(const IterationEvent& e) const {
    if (mask & Sink::kIterationEvents) sink.iteration(e.step_id, e.index, e.duration_ns);
  }
  void operator()(const AttemptEvent& e) const {
    if (mask & Sink::kAttemptEvents) sink.attempt(e.step_id, e.attempt);
  }
  void operator()(const StepEndedEvent& e) const {
    if (mask & Sink::kStepEvents) sink.step_ended(e.step);
  }
  void operator()(const SampleEvent& e) const {
    if (mask & Sink::kSampleEvents) sink.sample(e.offset_ns, e.values);
  }
  void operator()(const ErrorEvent& e) const {
    if (mask & Sink::kErrorEvents) sink.monitoring_error(e.error);
  }
  void operator()(const RunFinishedEvent& e) const {
    if (mask & Sink::kRunEvents) sink.run_finished(e.run);
  }
};

std::string sink_name(const Sink& sink) noexcept {
  try {
    return sink.name();
  } catch (...) {
    return "sink";
  }
}

}  // namespace

SinkDispatcher::SinkDispatcher(std::size_t capacity) : state_(std::make_shared<State>()) {
  state_->capacity = capacity == 0 ? 1 : capacity;
  thread_ = std::thread(&SinkDispatcher::loop, state_);
}

SinkDispatcher::~SinkDispatcher() {
  bool exited = false;
  {
    std::unique_lock lock(state_->mutex);
    state_->stop = true;
    state_->wake.notify_all();
    exited = state_->delivered.wait_for(lock, state_->stop_timeout, [&] { return state_->exited; });
  }
  if (exited) {
    thread_.join();
  } else {
    thread_.detach();  // stuck in a sink: it owns the state (and the sinks) and ends with them
  }
}

unsigned SinkDispatcher::set_sinks(std::vector<std::shared_ptr<Sink>> sinks) {
  unsigned mask = 0;
  for (const auto& s : sinks) {
    try {
      mask |= s->events();
    } catch (...) {
      mask |= Sink::kAllEvents;
    }
  }
  std::lock_guard lock(state_->mutex);
  state_->sinks = std::move(sinks);
  state_->mask.store(mask, std::memory_order_release);
  return mask;
}

unsigned SinkDispatcher::mask() const noexcept {
  return state_->mask.load(std::memory_order_acquire);
}

void SinkDispatcher::set_run_start(std::int64_t steady_ns) noexcept {
  std::lock_guard lock(state_->mutex);
  state_->run_start_ns = steady_ns;
}

void SinkDispatcher::set_stop_timeout(std::chrono::milliseconds timeout) noexcept {
  std::lock_guard lock(state_->mutex);
  state_->stop_timeout = timeout;
}

void SinkDispatcher::post(SinkEvent event) noexcept {
  try {
    std::lock_guard lock(state_->mutex);
    if (state_->queue.size() >= state_->capacity) {
      ++state_->dropped;
      return;
    }
    state_->queue.emplace_back(++state_->posted, std::move(event));
    state_->wake.notify_one();
  } catch (...) {
    // Out of memory while queueing: the event is lost, the pipeline is not.
  }
}

bool SinkDispatcher::post_and_wait(SinkEvent event, std::chrono::milliseconds timeout) noexcept {
  try {
    std::unique_lock lock(state_->mutex);
    const std::uint64_t seq = ++state_->posted;
    state_->queue.emplace_back(seq, std::move(event));
    state_->wake.notify_one();
    return state_->delivered.wait_for(lock, timeout, [&] { return state_->done >= seq; });
  } catch (...) {
    return false;
  }
}

std::vector<MonitoringError> SinkDispatcher::take_errors() {
  std::lock_guard lock(state_->mutex);
  std::vector<MonitoringError> out = std::move(state_->errors);
  for (MonitoringError& e : out) {
    const int n = state_->error_counts[{e.source, e.message}];
    if (n > 1) e.message += " (repeated " + std::to_string(n) + " times)";
  }
  if (state_->dropped > 0) {
    out.push_back({"sinks",
                   "sinks fell behind: " + std::to_string(state_->dropped) +
                       " live events dropped (queue of " + std::to_string(state_->capacity) +
                       " full)",
                   steady_now_ns() - state_->run_start_ns,
                   {}});
  }
  state_->errors.clear();
  state_->error_counts.clear();
  state_->dropped = 0;
  return out;
}

void SinkDispatcher::loop(std::shared_ptr<State> state) {
  std::unique_lock lock(state->mutex);
  for (;;) {
    state->wake.wait(lock, [&] { return state->stop || !state->queue.empty(); });
    if (state->queue.empty()) break;  // stopping, and everything delivered
    auto [seq, event] = std::move(state->queue.front());
    state->queue.pop_front();
    std::vector<std::shared_ptr<Sink>> sinks = state->sinks;
    lock.unlock();
    for (const auto& sink : sinks) {
      try {
        std::visit(Deliver{*sink, sink->events()}, event);
      } catch (const std::exception& e) {
        state->add_error(sink_name(*sink), e.what());
      } catch (...) {
        state->add_error(sink_name(*sink), "non-standard exception");
      }
    }
    lock.lock();
    state->done = seq;
    state->delivered.notify_all();
  }
  state->exited = true;
  state->delivered.notify_all();
}

}  // namespace genscope::detail
