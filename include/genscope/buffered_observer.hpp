// BufferedObserver: decouples reading a program's output from analysing it. ChildProcess's
// pass-through loop hands every event to this observer, which only queues it (a copy of the
// bytes) and returns; one thread of its own calls the wrapped observer (a WatchSession feed) in
// the same order. So the program's output never waits for line matching: when the analysis
// cannot keep up and the queue holds `capacity_bytes`, further output is passed through but
// not analysed, and counted (dropped_bytes()). Event lines are never dropped: past twice the
// capacity event_line() waits until the analysis made room (back-pressure on the event
// channel's writer). The delivery thread runs at nice 10: where
// the program, the pass-through and the analysis compete for a core, the analysis yields.
//
// Example:
//   RunObserver feed(session, tree);                 // calls the WatchSession
//   genscope::BufferedObserver buffered(feed);       // what ChildProcess::run() calls
//   int status = child.run(buffered);
//   buffered.finish();                               // the queue drained, the thread ended
//   session.program_exited(status, now);
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "genscope/child_process.hpp"

namespace genscope {

/// A ChildObserver that queues events and delivers them to `inner` on its own thread.
class BufferedObserver final : public ChildObserver {
 public:
  /// Starts the delivery thread. `inner` must outlive finish().
  explicit BufferedObserver(ChildObserver& inner, std::size_t capacity_bytes = 64u << 20);
  /// finish() if not done yet.
  ~BufferedObserver() override;
  BufferedObserver(const BufferedObserver&) = delete;
  BufferedObserver& operator=(const BufferedObserver&) = delete;

  void output(int stream, std::string_view bytes, std::int64_t steady_ns) override;
  void event_line(std::string_view line, std::int64_t steady_ns) override;
  void reaped(int pid, int wait_status, double maxrss_bytes) override;
  void signal_forwarded(int signal) override;
  void tick(std::int64_t steady_ns) override;

  /// Delivers everything queued, then ends the thread (idempotent). With a `budget`, output
  /// and event lines still queued when it has run out are counted (dropped_bytes(),
  /// dropped_event_lines()) instead of analysed, so this returns within about the budget
  /// plus one line's analysis.
  void finish(std::chrono::milliseconds budget = std::chrono::milliseconds::max());
  /// Output bytes that were passed through but not analysed (the queue was full, or
  /// finish()'s budget ran out).
  std::uint64_t dropped_bytes() const noexcept;
  /// Event lines not analysed because finish()'s budget ran out.
  std::uint64_t dropped_event_lines() const noexcept;
  /// What the inner observer threw, if it did (it is not called again after that).
  std::string inner_error() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace genscope
