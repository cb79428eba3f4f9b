// MemoryCgroup: a memory cgroup of its own for a program genscope starts, so the program's
// whole process tree has one exact peak (cgroup v2 memory.peak, v1 memory.max_usage_in_bytes).
//
// The cgroup is created below genscope's own memory cgroup (read from /proc/self/cgroup and
// /proc/self/mountinfo); the program joins it before exec (ChildOptions::cgroup). The
// destructor moves any process still in it to the parent cgroup and removes it. Creating one
// needs write access to the parent cgroup (root, or a delegated subtree); where that is not
// possible the constructor throws and the caller falls back to per-process figures. The
// constructor first removes the cgroups of genscope processes that are gone (kill -9).
// What the figures include: docs/run.md ("Memory of the process tree").
#pragma once

#include <filesystem>
#include <string>

namespace genscope {

/// A memory cgroup created for one watched program; removed on destruction.
class MemoryCgroup {
 public:
  /// Creates `genscope-<pid>-<n>` below this process's memory cgroup. Throws
  /// genscope::Error("CgroupUnavailable") saying why (no memory controller, v2 controller
  /// not delegated, permission denied, ...).
  MemoryCgroup();
  ~MemoryCgroup();
  MemoryCgroup(MemoryCgroup&& other) noexcept;  // (stale_removed() is not moved)
  MemoryCgroup& operator=(MemoryCgroup&& other) noexcept;
  MemoryCgroup(const MemoryCgroup&) = delete;
  MemoryCgroup& operator=(const MemoryCgroup&) = delete;

  /// The cgroup's directory, e.g. /sys/fs/cgroup/memory/.../genscope-4242-0.
  const std::filesystem::path& path() const noexcept { return path_; }
  /// 1 (cgroup v1 memory controller) or 2 (unified hierarchy).
  int version() const noexcept { return version_; }
  /// How many stale cgroups the constructor removed: `genscope-<pid>-<n>` next to the new
  /// one whose genscope no longer exists (it was killed with SIGKILL and could not clean up).
  int stale_removed() const noexcept { return stale_removed_; }
  /// Removes the cgroup now (moving leftover processes to the parent first); idempotent.
  /// Returns an empty string or why it could not be removed.
  std::string remove() noexcept;

 private:
  std::filesystem::path path_;
  std::filesystem::path parent_;
  int version_ = 0;
  int stale_removed_ = 0;
};

}  // namespace genscope
