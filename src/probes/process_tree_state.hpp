// The shared state of a ProcessTree: the processes it follows, their open /proc files and
// what was measured of each. Used by the ProcessTree facade and its probe; every member
// function expects `mutex` to be held (the _locked suffix).
//
// One process, as followed:
//
//   discovered ──► sampled every interval (statm: RSS) ──► gone (statm read fails: ESRCH)
//        │            at step boundaries: VmHWM read (status), then clear_refs "5" (reset)
//        └─ key "pid@starttime" tells a reused pid apart
#pragma once

#include <cstdint>
#include <dirent.h>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "genscope/process_tree.hpp"
#include "probes/proc_file.hpp"

namespace genscope {

struct TrackedProcess {
  int pid = 0;
  int ppid = 0;
  std::uint64_t start_ticks = 0;
  std::string command;            // cmdline joined by spaces (cut), else comm
  std::int64_t first_seen_ns = 0;  // steady clock
  std::int64_t gone_ns = -1;       // when a read first failed (exit), -1 while alive
  detail::ProcFile statm, status, clear_refs, cmdline;
  // Threads whose children lists are read in /proc walks (tid -> file), and the task dir.
  std::map<int, detail::ProcFile> children;
  DIR* tasks = nullptr;
  bool had_children = false;       // a process of the tree had it as parent
  bool reset_ok = false;           // clear_refs accepted so far
  std::string reset_error;         // why not
  bool reset_in_window = false;    // VmHWM was reset at (or the process born after) the
                                   // last reset_peaks(): VmHWM is this window's exact peak
  double rss_bytes = kNaN;         // last sample
  double part_peak = kNaN;         // max since the previous read_parts()
  bool part_exact = true;          // part_peak's window is covered by VmHWM reads
  bool in_part_window = true;      // seen since the previous read_parts()
  double lifetime_peak = kNaN;     // max of every sample and VmHWM read (and ru_maxrss)
  bool lifetime_exact = true;      // no window of its life was left unread
  double rusage_maxrss = kNaN;     // from process_exited()
  bool rusage_only = false;        // never seen alive: only wait4's figure is known
  double gpu_peak_bytes = kNaN;    // highest GPU memory NVML reported for it

  TrackedProcess() = default;
  TrackedProcess(const TrackedProcess&) = delete;
  TrackedProcess& operator=(const TrackedProcess&) = delete;
  ~TrackedProcess();
  bool alive() const noexcept { return gone_ns < 0; }
  std::string key() const { return std::to_string(pid) + "@" + std::to_string(start_ticks); }
};

struct ProcessTree::State {
  ProcessTreeOptions options;
  mutable std::mutex mutex;
  std::vector<std::unique_ptr<TrackedProcess>> processes;  // alive and gone, in order seen
  std::map<int, TrackedProcess*> alive;                    // by pid
  detail::ProcFile cgroup_procs, cgroup_usage, cgroup_peak;  // cgroup_procs: open = in use
  std::string cgroup_procs_path;
  std::string cgroup_error;        // why the cgroup figures are missing
  bool cgroup_reset_ok = false;
  bool cgroup_reset_in_window = false;
  double cgroup_lifetime_peak = kNaN;  // since the previous take_summary()
  double tree_rss_max = kNaN;          // highest sampled sum since the previous take_summary()
  std::size_t window_processes = 0;    // processes alive at some point since the last reset
  bool window_unreset = false;         // one of them could not be reset
  std::int64_t window_start_ns = 0;    // the last reset (steady clock)
  bool opened = false;
  std::vector<std::string> notes;
  std::int64_t period_start_ns = 0;  // start of the current take_summary() period

  /// Opens the cgroup files (once).
  void open_locked();
  /// Finds processes that joined the tree (cgroup.procs, else /proc/<pid>/task/*/children
  /// from every process already followed). Returns the number of new processes.
  std::size_t discover_locked(std::int64_t now_ns);
  /// Starts following `pid` (parent `ppid`, 0 = unknown); false when it is already gone.
  bool add_locked(int pid, int ppid, std::int64_t now_ns);
  /// Samples every live process's RSS; marks those whose reads fail as gone. Sum of RSS.
  double sample_locked(std::int64_t now_ns);
  /// Reads a live process's VmHWM (bytes), folding it into its lifetime peak and, with
  /// `into_part`, its part peak; NaN (and the process marked gone) on failure.
  double read_hwm_locked(TrackedProcess& p, std::int64_t now_ns, bool into_part = true);
  /// Re-reads a live process's command line (it may have exec'd since it was found).
  void refresh_command_locked(TrackedProcess& p);
  /// A fresh RSS of one live process (bytes); NaN when it is gone.
  double read_rss_locked(TrackedProcess& p);
  /// Marks a process gone at `now_ns` (its windows can no longer be read).
  void mark_gone_locked(TrackedProcess& p, std::int64_t now_ns);
  /// Adds a note once.
  void note_locked(std::string note);
};

}  // namespace genscope
