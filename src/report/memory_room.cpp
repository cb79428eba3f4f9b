// memory_room(): the tightest of the memory limits this process runs under (see memory_room.hpp).
#include "report/memory_room.hpp"

#include <sys/resource.h>

#include <fstream>
#include <iterator>

#include "probes/proc_file.hpp"

namespace genscope::detail {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::optional<std::uint64_t> read_number(const std::string& path) {
  const std::string text = read_text(path);
  std::size_t pos = 0;
  return parse_decimal(text, pos);  // "max" (no limit) and an unreadable file: nullopt
}

std::string mib(std::uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

void consider(std::optional<MemoryRoom>& room, std::uint64_t limit, std::uint64_t used,
              const std::string& name) {
  const std::uint64_t left = limit > used ? limit - used : 0;
  if (!room || left < room->bytes) room = MemoryRoom{left, name + " " + mib(limit)};
}

// The cgroup v2 folder of this process ("0::/path" in /proc/self/cgroup), or "".
std::string own_cgroup_v2() {
  const std::string text = read_text("/proc/self/cgroup");
  const std::size_t at = text.find("0::");
  if (at != 0 && (at == std::string::npos || text[at - 1] != '\n')) return {};
  const std::size_t end = text.find('\n', at);
  return "/sys/fs/cgroup" + text.substr(at + 3, end == std::string::npos ? end : end - at - 3);
}

}  // namespace

std::optional<MemoryRoom> memory_room() {
  std::optional<MemoryRoom> room;
  const std::string status = read_text("/proc/self/status");
  rlimit lim{};
  if (::getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    consider(room, lim.rlim_cur, parse_kb_field(status, "VmSize").value_or(0),
             "the address-space limit (RLIMIT_AS, ulimit -v)");
  }
  if (::getrlimit(RLIMIT_DATA, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    consider(room, lim.rlim_cur, parse_kb_field(status, "VmData").value_or(0),
             "the data limit (RLIMIT_DATA, ulimit -d)");
  }
  if (const std::string cgroup = own_cgroup_v2(); !cgroup.empty()) {
    const auto max = read_number(cgroup + "/memory.max");
    const auto current = read_number(cgroup + "/memory.current");
    if (max && current) consider(room, *max, *current, "the memory cgroup's memory.max");
  }
  const std::string meminfo = read_text("/proc/meminfo");
  if (const auto available = parse_kb_field(meminfo, "MemAvailable")) {
    const std::uint64_t swap = parse_kb_field(meminfo, "SwapFree").value_or(0);
    consider(room, *available + swap, 0, "the machine's available memory and swap");
  }
  return room;
}

}  // namespace genscope::detail
