// The per-thread stack of open steps, which gives each new step its parent.
#pragma once

#include <string>

namespace genscope::detail {

struct RunState;
struct StepState;

/// Pushes a step opened by this thread.
void push_step(const RunState* run, StepState* step);
/// Removes a step from this thread's stack (no-op when absent).
void pop_step(const RunState* run, const StepState* step) noexcept;
/// The innermost open step of `run` on this thread, or nullptr.
StepState* current_step(const RunState* run) noexcept;
/// Its name, or empty.
std::string current_step_name(const RunState* run);

}  // namespace genscope::detail
