// Fuzz target for the procfs parsers the probes use on every sample (src/probes/proc_file):
// parse_kb_field (/proc/self/status, /proc/meminfo) and parse_statm_resident_pages; and
// those of the process-tree probe: parse_proc_stat (/proc/<pid>/stat) and for_each_pid
// (cgroup.procs, task children lists).
// Invariants: never read out of bounds, never crash; a parsed kB field is a multiple of
// 1024 and its key really starts a line.
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <string_view>

// The replay build links genscope without its private include path: reach the private
// header relative to this file.
#include "../../src/probes/proc_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (std::string_view key : {"VmHWM", "VmRSS", "MemTotal", "MemAvailable", "A"}) {
    if (const auto bytes = genscope::detail::parse_kb_field(text, key)) {
      assert(*bytes % 1024 == 0);
      const bool at_start = text.substr(0, key.size() + 1) == std::string(key) + ":";
      const bool after_newline = text.find("\n" + std::string(key) + ":") != text.npos;
      assert(at_start || after_newline);
      (void)at_start, (void)after_newline;
    }
  }
  (void)genscope::detail::parse_statm_resident_pages(text);
  if (const auto stat = genscope::detail::parse_proc_stat(text)) {
    // comm lies inside the input, between its first '(' and last ')'.
    assert(stat->comm.data() >= text.data() &&
           stat->comm.data() + stat->comm.size() <= text.data() + text.size());
    assert(stat->comm.data() + stat->comm.size() == text.data() + text.rfind(')'));
  }
  std::size_t pids = 0;
  genscope::detail::for_each_pid(text, [&](int pid) {
    assert(pid > 0);
    ++pids;
  });
  assert(pids <= size);
  return 0;
}
