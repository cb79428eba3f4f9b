// Private parsers that locate a process's memory cgroup directory.
//
//   /proc/self/cgroup      "ID:controllers:path" lines, e.g. "4:memory:/a/b" (v1) or "0::/a/b" (v2)
//   /proc/self/mountinfo   "id parent maj:min root mount-point options [tags...] - fstype source super"
//                          (mount point octal-escaped: "\040" is a space)
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace genscope::detail {

/// Where a cgroup hierarchy is mounted.
struct CgroupMount {
  std::string root;         ///< The hierarchy path that the mount point shows, usually "/".
  std::string mount_point;  ///< e.g. "/sys/fs/cgroup/memory".
};

/// The cgroup path of the memory controller: version 1 looks for a line whose controller
/// list holds "memory", version 2 for the "0::" line. nullopt when absent or malformed.
std::optional<std::string> parse_own_cgroup(std::string_view proc_self_cgroup, int version);

/// The mount of the memory hierarchy: version 1 a "cgroup" mount whose super options hold
/// "memory", version 2 the first "cgroup2" mount. nullopt when absent or malformed.
std::optional<CgroupMount> parse_cgroup_mount(std::string_view mountinfo, int version);

/// mount_point + (path below root); nullopt when `path` is not below the mount's root.
std::optional<std::string> cgroup_directory(const CgroupMount& mount, std::string_view path);

}  // namespace genscope::detail
