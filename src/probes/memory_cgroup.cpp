// MemoryCgroup: creation below genscope's own memory cgroup, and removal.
//
// v1: /sys/fs/cgroup/memory/<own>/genscope-<pid>-<n>/ with memory.usage_in_bytes and
//     memory.max_usage_in_bytes (writing "0" restarts the peak from the current usage).
// v2: <cgroup2 mount>/<own>/genscope-<pid>-<n>/ with memory.current and memory.peak; a child
//     only gets the memory files when the parent's cgroup.subtree_control enables "memory"
//     (a delegated subtree), which the constructor checks.
#include "genscope/memory_cgroup.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "genscope/error.hpp"
#include "probes/cgroup_paths.hpp"
#include "probes/proc_file.hpp"

namespace genscope {
namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The directory of this process's memory cgroup for `version`, or "" (with `why`).
std::string own_directory(int version, std::string& why) {
  const std::string cgroups = read_text("/proc/self/cgroup");
  const std::string mounts = read_text("/proc/self/mountinfo");
  const auto own = detail::parse_own_cgroup(cgroups, version);
  if (!own) {
    why = version == 1 ? "no memory controller in /proc/self/cgroup" : "no cgroup v2 line";
    return {};
  }
  const auto mount = detail::parse_cgroup_mount(mounts, version);
  if (!mount) {
    why = version == 1 ? "the memory hierarchy is not mounted" : "cgroup2 is not mounted";
    return {};
  }
  const auto dir = detail::cgroup_directory(*mount, *own);
  if (!dir) {
    why = "own cgroup " + *own + " is outside the mount " + mount->mount_point;
    return {};
  }
  return *dir;
}

bool file_exists(const std::filesystem::path& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Moves the processes left in `dir` to `parent` and removes `dir`; true when it is gone.
bool empty_and_remove(const std::filesystem::path& dir, const std::filesystem::path& parent) {
  for (int attempt = 0; attempt < 50; ++attempt) {
    const std::string procs = read_text(dir / "cgroup.procs");
    bool any = false;
    detail::for_each_pid(procs, [&](int pid) {
      any = true;
      std::ofstream(parent / "cgroup.procs") << pid << '\n';
    });
    if (::rmdir(dir.c_str()) == 0) return true;
    if (errno != EBUSY) return false;
    // A process that just exited can keep the cgroup busy for a moment.
    std::this_thread::sleep_for(std::chrono::milliseconds(any ? 2 : 10));
  }
  return false;
}

// The cgroups `genscope-<pid>-<n>` below `parent` whose genscope is gone (killed with -9, or
// the machine lost power): removed, their processes moved to `parent`. Returns how many.
int remove_stale(const std::filesystem::path& parent) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("genscope-", 0) != 0) continue;
    const std::size_t dash = name.find('-', 9);
    if (dash == std::string::npos) continue;
    int pid = 0;
    try {
      pid = std::stoi(name.substr(9, dash - 9));
    } catch (const std::exception&) {
      continue;
    }
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // its genscope is alive
    if (empty_and_remove(entry.path(), parent)) ++removed;
  }
  return removed;
}

}  // namespace

MemoryCgroup::MemoryCgroup() {
  static std::atomic<int> counter{0};
  std::string why1, why2;
  // v1 first: where the memory controller sits on a v1 hierarchy, the v2 tree has no memory
  // files (hybrid mounts, as on this project's machines).
  for (int version : {1, 2}) {
    std::string& why = version == 1 ? why1 : why2;
    const std::string parent = own_directory(version, why);
    if (parent.empty()) continue;
    if (version == 2) {
      const std::string control = read_text(std::filesystem::path(parent) / "cgroup.subtree_control");
      if (control.find("memory") == std::string::npos) {
        why = "the memory controller is not enabled for children of " + parent +
              " (cgroup.subtree_control)";
        continue;
      }
    }
    stale_removed_ += remove_stale(parent);
    const std::filesystem::path dir = std::filesystem::path(parent) /
                                      ("genscope-" + std::to_string(::getpid()) + "-" +
                                       std::to_string(counter.fetch_add(1)));
    if (::mkdir(dir.c_str(), 0755) != 0) {
      why = "cannot create " + dir.string() + ": " + detail::errno_text(errno);
      continue;
    }
    const char* peak_file = version == 1 ? "memory.max_usage_in_bytes" : "memory.peak";
    if (!file_exists(dir / peak_file)) {
      why = dir.string() + " has no " + peak_file;
      ::rmdir(dir.c_str());
      continue;
    }
    path_ = dir;
    parent_ = parent;
    version_ = version;
    return;
  }
  throw Error("CgroupUnavailable", "no memory cgroup for the program (v1: " + why1 +
                                       "; v2: " + why2 + ")");
}

MemoryCgroup::~MemoryCgroup() { remove(); }

MemoryCgroup::MemoryCgroup(MemoryCgroup&& other) noexcept
    : path_(std::move(other.path_)), parent_(std::move(other.parent_)), version_(other.version_) {
  other.path_.clear();
}

MemoryCgroup& MemoryCgroup::operator=(MemoryCgroup&& other) noexcept {
  if (this != &other) {
    remove();
    path_ = std::move(other.path_);
    parent_ = std::move(other.parent_);
    version_ = other.version_;
    other.path_.clear();
  }
  return *this;
}

std::string MemoryCgroup::remove() noexcept {
  if (path_.empty()) return {};
  std::string error;
  try {
    // Processes still inside (daemons CMD left behind) go back to the parent cgroup; a
    // process that exits meanwhile makes its write fail harmlessly.
    if (empty_and_remove(path_, parent_)) {
      path_.clear();
      return {};
    }
    error = "cannot remove " + path_.string() + ": " + detail::errno_text(errno);
  } catch (const std::exception& e) {
    error = e.what();
  }
  path_.clear();  // given up: never retried from the destructor
  return error;
}

}  // namespace genscope
