// Memory set aside for the way out when genscope runs out of memory (docs/reliability.md).
#pragma once

namespace genscope::cli {

/// Sets aside a reserve of address space and installs a new-handler: the first allocation
/// that fails frees the reserve and throws std::bad_alloc, so that unwinding (destructors that
/// allocate, such as nlohmann::json's) and the error message have memory to finish with
/// instead of ending in std::terminate. Call once at start; again after an out-of-memory
/// error was handled and the program goes on.
void arm_memory_reserve() noexcept;

/// What `genscope: error [OutOfMemory]` says.
inline constexpr const char* kOutOfMemoryMessage =
    "not enough memory to finish (the run document or an output is too large for the memory "
    "this process may use: ulimit -v, ulimit -d, its memory cgroup, the machine's memory)";

}  // namespace genscope::cli
