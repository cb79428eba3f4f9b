// EventApplier: applies checked event-channel lines (src/event_line/) to the StepApplier (docs/run.md,
// "Event channel"). Events address the innermost step the channel opened unless they name
// one ("step"/"name", or "ref" for forwarded steps); a line that addresses no open step is a
// monitoring error of the run, never fatal.
#pragma once

#include <cstdint>
#include <map>
#include <string_view>

#include "event_line/event.hpp"
#include "watch/step_applier.hpp"

namespace genscope::watch {

using event_line::Event;
using event_line::EventType;

/// Turns events into runs and steps.
class EventApplier {
 public:
  explicit EventApplier(StepApplier& applier) : applier_(applier) {}
  /// Applies one parsed event read at `steady_ns`.
  void apply(const Event& event, std::int64_t steady_ns);

 private:
  int target(const Event& event) const;
  StepApplier& applier_;
  std::map<int, std::int64_t> last_attempt_ns_;
};

}  // namespace genscope::watch
