// ProcessTree: the memory of a program genscope does not run in-process — the program and
// every descendant, followed as they come and go (`genscope run`, `genscope watch`).
//
// Its probe (make_probe()) reports fixed columns:
//   tree.rss_bytes      sum of the RSS of the tree's processes (statm); exact peak while the
//                       tree is one process (VmHWM reset through its clear_refs), else sampled
//   tree.processes      processes in the tree
//   cgroup.usage_bytes  the memory cgroup's usage, exact peak from memory.peak /
//                       memory.max_usage_in_bytes (only with ProcessTreeOptions::cgroup)
// and per process, as "figure_parts" attachments of every step: each process's peak in the
// step (exact from its own VmHWM, reset at step boundaries). take_summary() gives each
// process's lifetime peak, tracked across those resets. Details: docs/run.md, docs/probes.md.
//
// Example:
//   auto tree = std::make_shared<genscope::ProcessTree>(genscope::ProcessTreeOptions{.root_pid = pid});
//   monitor.add_probe(tree->make_probe());
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "genscope/probe.hpp"
#include "genscope/run.hpp"

namespace genscope {

/// How a process tree is followed.
struct ProcessTreeOptions {
  int root_pid = 0;  ///< The program (0: set later with set_root()).
  /// Reset each process's VmHWM at step boundaries (exact per-step peaks). false leaves
  /// VmHWM alone (what getrusage() and `time -v` report stays untouched): sampled peaks.
  bool reset_peaks = true;
  /// A memory cgroup holding exactly the tree (MemoryCgroup::path()); empty = none. Its
  /// cgroup.procs also lists the tree, so no /proc walk is needed to find new processes.
  std::filesystem::path cgroup;
  int cgroup_version = 0;  ///< MemoryCgroup::version() (1 or 2).
};

/// A program's process tree: discovery, per-process figures and lifetime peaks. Thread-safe.
class ProcessTree {
 public:
  explicit ProcessTree(ProcessTreeOptions options);
  ~ProcessTree();
  ProcessTree(const ProcessTree&) = delete;
  ProcessTree& operator=(const ProcessTree&) = delete;

  /// Sets the root process when it was not known at construction (started afterwards).
  void set_root(int pid);
  /// The root process (0 when not set).
  int root() const;
  /// A probe over this tree (name "process_tree") to add to a Monitor; it shares the tree.
  std::unique_ptr<Probe> make_probe();
  /// True when `pid` was in the tree at the last discovery (NVML scoping uses it).
  bool contains(int pid) const;
  /// A process of the tree ended and was reaped by the caller: wait4's ru_maxrss in bytes
  /// (NaN when not to be trusted). Reported as is; for a process that had no children it
  /// also completes the lifetime peak (its last window, which /proc can no longer show).
  void process_exited(int pid, double rusage_maxrss_bytes);
  /// The "process_tree" run attachment: every process seen since the previous call with its
  /// lifetime peak, and the tree's figures; starts the next period (one per run).
  Attachment take_summary();
  /// How the figures were obtained and what fell back (resets refused, no cgroup, ...).
  std::vector<std::string> notes() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

/// NVIDIA GPUs through NVML (as make_nvml_probe()), with `gpu<i>.tree_used_bytes` = the GPU
/// memory of the tree's processes instead of this process's, and per-process GPU memory as
/// "figure_parts" of every step. Device-wide figures stay device-wide.
std::unique_ptr<Probe> make_nvml_probe(std::string library_path,
                                       std::shared_ptr<const ProcessTree> scope);

}  // namespace genscope
