// The machine a run executes on: hostname, CPU model, cores, RAM and OS.
#pragma once

#include "genscope/run.hpp"

namespace genscope {

/// Reads this machine's HostInfo (gethostname, /proc/cpuinfo, /proc/meminfo, uname).
/// Never throws: a figure that cannot be read stays empty / zero.
HostInfo read_host_info() noexcept;

}  // namespace genscope
