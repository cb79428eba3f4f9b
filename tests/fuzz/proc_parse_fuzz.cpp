// Fuzz target for the procfs parsers the probes use on every sample (src/probes/proc_file):
// parse_kb_field (/proc/self/status, /proc/meminfo) and parse_statm_resident_pages; and
// those of the process-tree probe: parse_proc_stat (/proc/<pid>/stat) and for_each_pid
// (cgroup.procs, task children lists), and the cgroup locators over /proc/self/cgroup and
// /proc/self/mountinfo text (a directory never climbs out of its mount).
// Invariants: never read out of bounds, never crash; a parsed kB field is a multiple of
// 1024 and its key really starts a line.
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

// The replay build links genscope without its private include path: reach the private
// header relative to this file.
#include "../../src/probes/cgroup_paths.hpp"
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
  for (int version : {1, 2}) {
    const auto own = genscope::detail::parse_own_cgroup(text, version);
    if (own) assert(!own->empty() && own->front() == '/');
    if (const auto mount = genscope::detail::parse_cgroup_mount(text, version)) {
      assert(!mount->root.empty() && mount->root.front() == '/' && !mount->mount_point.empty());
      if (own) {
        if (const auto dir = genscope::detail::cgroup_directory(*mount, *own)) {
          assert(dir->rfind(mount->mount_point, 0) == 0);
          assert(dir->find("/../") == std::string::npos);
        }
      }
    }
  }
  return 0;
}
