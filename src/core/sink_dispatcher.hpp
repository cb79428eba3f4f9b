// SinkDispatcher: queues a monitor's live events and delivers them to its sinks on one
// background thread (see include/genscope/sink.hpp for the contract).
//
// The pipeline's threads only append to a bounded queue; the dispatcher thread calls the
// sinks. Lock order: a caller may hold RunState::mutex while posting; the dispatcher never
// takes a run's lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "genscope/run.hpp"
#include "genscope/sink.hpp"

namespace genscope::detail {

struct RunStartedEvent {
  Run run;
};
struct StepBeganEvent {
  StepRecord step;
};
struct IterationEvent {
  int step_id;
  std::size_t index;
  std::int64_t duration_ns;
};
struct AttemptEvent {
  int step_id;
  Attempt attempt;
};
struct StepEndedEvent {
  StepRecord step;
};
struct SampleEvent {
  std::int64_t offset_ns;
  std::vector<double> values;
};
struct ErrorEvent {
  MonitoringError error;
};
struct RunFinishedEvent {
  Run run;
};
using SinkEvent = std::variant<RunStartedEvent, StepBeganEvent, IterationEvent, AttemptEvent,
                               StepEndedEvent, SampleEvent, ErrorEvent, RunFinishedEvent>;

class SinkDispatcher {
 public:
  /// `capacity`: queued events beyond which new ones are dropped (and counted).
  explicit SinkDispatcher(std::size_t capacity);
  /// Stops the thread after the queue drains, waiting at most `stop_timeout`; a thread stuck
  /// in a sink is detached (it keeps the sinks alive) rather than hanging the caller.
  ~SinkDispatcher();
  SinkDispatcher(const SinkDispatcher&) = delete;
  SinkDispatcher& operator=(const SinkDispatcher&) = delete;

  /// Replaces the sinks (for the next run); returns the union of their event masks.
  unsigned set_sinks(std::vector<std::shared_ptr<Sink>> sinks);
  /// The union of the current sinks' event masks.
  unsigned mask() const noexcept;
  /// Marks the start of a run (for the time offsets of the errors sinks raise).
  void set_run_start(std::int64_t steady_ns) noexcept;
  /// Queues an event; never blocks on a sink. Dropped (and counted) when the queue is full.
  void post(SinkEvent event) noexcept;
  /// Queues an event even when the queue is full and waits until it has been delivered to
  /// every sink, at most `timeout`. False on timeout.
  bool post_and_wait(SinkEvent event, std::chrono::milliseconds timeout) noexcept;
  /// Errors raised by sinks (and the count of dropped events) since the last call.
  std::vector<MonitoringError> take_errors();
  /// How long the destructor waits for the thread.
  void set_stop_timeout(std::chrono::milliseconds timeout) noexcept;

 private:
  struct State;
  static void loop(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace genscope::detail
