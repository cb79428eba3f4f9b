// Private factories of the procfs probes with injectable paths, so tests can point them
// at crafted files (a status without VmHWM, /dev/full as a clear_refs that refuses writes).
#pragma once

#include <memory>

#include "genscope/probe.hpp"

namespace genscope::detail {

/// The files the process probe reads and writes.
struct ProcessProbePaths {
  const char* statm = "/proc/self/statm";
  const char* status = "/proc/self/status";
  const char* clear_refs = "/proc/self/clear_refs";
};

/// The process probe over `paths` (make_process_probe() uses the defaults).
std::unique_ptr<Probe> make_process_probe(const ProcessProbePaths& paths);
/// The system probe over `meminfo_path` (make_system_probe() uses "/proc/meminfo").
std::unique_ptr<Probe> make_system_probe(const char* meminfo_path);

}  // namespace genscope::detail
