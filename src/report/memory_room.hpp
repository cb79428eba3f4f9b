// How much more memory this process can take (private to src/report): the smallest of the
// limits that apply, read when a large input is about to be parsed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace genscope::detail {

struct MemoryRoom {
  std::uint64_t bytes = 0;  ///< What can still be allocated under the tightest limit.
  std::string limit;        ///< Which limit that is ("RLIMIT_AS (ulimit -v) 586 MiB", ...).
};

/// The smallest of: RLIMIT_AS minus the address space in use (VmSize), RLIMIT_DATA minus the
/// data in use (VmData), the memory cgroup's memory.max minus memory.current (cgroup v2), and
/// the machine's MemAvailable plus SwapFree. nullopt when none of them can be read.
std::optional<MemoryRoom> memory_room();

}  // namespace genscope::detail
