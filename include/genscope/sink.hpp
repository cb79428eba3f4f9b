// Sink: receives a run's events while it is in progress (the live side of genscope).
//
// The finished Run value feeds every report; what must happen *during* a run (the text log,
// the history recorder, a metrics endpoint, forwarding steps to a parent `genscope run`, user
// code) is a Sink registered on the Monitor. Core knows no sink implementation.
//
// Delivery: events are queued by the pipeline's threads (a few hundred nanoseconds, never a
// call into the sink) and delivered in order, one at a time, on the Monitor's dispatcher
// thread. A slow or blocked sink therefore delays only the other sinks, never the pipeline;
// when the bounded queue is full, events are dropped and counted (a monitoring error of the
// run). An exception thrown by a sink is recorded as a monitoring error of the run with the
// sink's name as its source. ActiveRun::finish() waits for run_finished() to be delivered,
// up to MonitorOptions::sink_timeout.
//
// Example:
//   struct Printer : genscope::Sink {
//     std::string name() const override { return "printer"; }
//     unsigned events() const override { return kStepEvents; }
//     void step_ended(const genscope::StepRecord& s) override { std::puts(s.name.c_str()); }
//   };
//   monitor.add_sink(std::make_shared<Printer>());
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "genscope/run.hpp"

namespace genscope {

/// Receives the live events of a Monitor's runs. Override what you need; every call is
/// made on the Monitor's dispatcher thread, one event at a time, in the order they happened.
class Sink {
 public:
  /// Event groups, combined in the mask returned by events().
  enum EventGroup : unsigned {
    kRunEvents = 1u << 0,        ///< run_started, run_finished
    kStepEvents = 1u << 1,       ///< step_began, step_ended
    kIterationEvents = 1u << 2,  ///< iteration
    kAttemptEvents = 1u << 3,    ///< attempt
    kSampleEvents = 1u << 4,     ///< sample
    kErrorEvents = 1u << 5,      ///< monitoring_error
    kAllEvents = (1u << 6) - 1,
  };

  virtual ~Sink() = default;
  /// Short stable name; the source of the monitoring errors this sink causes.
  virtual std::string name() const = 0;
  /// The event groups this sink wants; events nobody wants are never queued.
  virtual unsigned events() const { return kAllEvents; }

  /// A run started: its metadata and the columns of its samples (series.metrics/units);
  /// no steps yet.
  virtual void run_started(const Run& /*run*/) {}
  /// A step opened: id, parent, name, kind, thread, start offset, and each metric's
  /// `before` value (peak and after are not known yet).
  virtual void step_began(const StepRecord& /*step*/) {}
  /// Iteration `index` (0-based) of step `step_id` took `duration_ns`.
  virtual void iteration(int /*step_id*/, std::size_t /*index*/, std::int64_t /*duration_ns*/) {}
  /// An attempt of a fallback chain finished inside step `step_id`.
  virtual void attempt(int /*step_id*/, const Attempt& /*attempt*/) {}
  /// A step closed: the complete record (figures, peaks, counters, attachments, ...).
  virtual void step_ended(const StepRecord& /*step*/) {}
  /// One sampler row, `offset_ns` from the run start, one value per series column.
  virtual void sample(std::int64_t /*offset_ns*/, std::span<const double> /*values*/) {}
  /// A monitoring error was recorded (a failed probe, analysis, ...).
  virtual void monitoring_error(const MonitoringError& /*error*/) {}
  /// The run finished: the complete Run value, as ActiveRun::finish() returns it.
  virtual void run_finished(const Run& /*run*/) {}
};

}  // namespace genscope
