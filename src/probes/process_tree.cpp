// ProcessTree: discovery of a program's processes, their RSS and VmHWM, the memory cgroup's
// figures, and each process's lifetime peak across the per-step VmHWM resets.
//
// Discovery (every sample and at every step boundary):
//   with a cgroup   cgroup.procs lists every process of the tree (one read);
//   without         /proc/<pid>/task/<tid>/children of every thread of every followed
//                   process (Linux >= 3.5, CONFIG_PROC_CHILDREN), files kept open.
// A process stays followed until its own /proc files fail (it exited), so one that is
// re-parented away from the tree (its parent died) is still followed once seen.
// Per-process files (statm, status, clear_refs) are opened once and re-read with pread.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>

#include "genscope/probe.hpp"
#include "genscope/process_tree.hpp"
#include "genscope/step.hpp"
#include "probes/process_tree_state.hpp"

namespace genscope {
namespace {

double nan_max(double a, double b) {
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  return std::max(a, b);
}

// Reads a whole small /proc file (stat, cmdline) in one go; "" when it cannot be read.
std::string read_small(const char* path, std::size_t limit) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string text(limit, '\0');
  std::size_t got = 0;
  while (got < limit) {
    const ssize_t n = ::read(fd, text.data() + got, limit - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  text.resize(got);
  return text;
}

// Reads a ProcFile whose content may exceed a stack buffer (cgroup.procs, children lists).
bool read_all(const detail::ProcFile& file, std::string& buffer) {
  if (buffer.size() < 4096) buffer.resize(4096);
  for (;;) {
    const long n = file.read_into(buffer.data(), buffer.size());
    if (n < 0) return false;
    if (static_cast<std::size_t>(n) < buffer.size()) {
      buffer.resize(static_cast<std::size_t>(n));
      return true;
    }
    buffer.resize(buffer.size() * 2);  // a full buffer may be a cut list: read it again
  }
}

// "size resident ..." of statm: both fields, so a zombie (no mm: "0 0 ...") is told apart.
bool parse_statm(std::string_view text, std::uint64_t& size, std::uint64_t& resident) {
  std::size_t pos = 0;
  const auto s = detail::parse_decimal(text, pos);
  const auto r = s ? detail::parse_decimal(text, pos) : std::nullopt;
  if (!r) return false;
  size = *s;
  resident = *r;
  return true;
}

const double kPageBytes = [] {
  const long page = ::sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<double>(page) : 4096.0;
}();

}  // namespace

TrackedProcess::~TrackedProcess() {
  if (tasks != nullptr) ::closedir(tasks);
}

void ProcessTree::State::note_locked(std::string note) {
  if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(std::move(note));
}

void ProcessTree::State::open_locked() {
  if (opened) return;
  opened = true;
  period_start_ns = Step::now_ns();
  if (options.cgroup.empty()) return;
  const bool v1 = options.cgroup_version != 2;
  const std::string dir = options.cgroup.string();
  const std::string usage = dir + (v1 ? "/memory.usage_in_bytes" : "/memory.current");
  const std::string peak = dir + (v1 ? "/memory.max_usage_in_bytes" : "/memory.peak");
  cgroup_procs_path = dir + "/cgroup.procs";
  std::string error = cgroup_procs.open(cgroup_procs_path.c_str(), O_RDONLY);
  if (error.empty()) error = cgroup_usage.open(usage.c_str(), O_RDONLY);
  if (!error.empty()) {
    cgroup_error = error;
    note_locked("cgroup: " + error + "; no cgroup figures");
    cgroup_procs = {};
    return;
  }
  cgroup_reset_ok = cgroup_peak.open(peak.c_str(), O_RDWR).empty();
  if (!cgroup_reset_ok) {
    const std::string why = cgroup_peak.open(peak.c_str(), O_RDONLY);
    note_locked("cgroup: the peak of " + peak + " cannot be reset" +
                (why.empty() ? "" : " (" + why + ")") + "; cgroup.usage_bytes peaks are sampled");
  }
}

bool ProcessTree::State::add_locked(int pid, int ppid, std::int64_t now_ns) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  const std::string stat_text = read_small(path, 1024);
  const auto stat = detail::parse_proc_stat(stat_text);
  if (!stat || stat->state == 'Z' || stat->state == 'X') return false;  // gone already
  if (auto it = alive.find(pid); it != alive.end()) {
    if (it->second->start_ticks == stat->start_ticks) return false;  // already followed
    mark_gone_locked(*it->second, now_ns);                           // the pid was reused
  }
  // A process seen gone (its memory released) may still be listed while it finishes exiting.
  for (const auto& p : processes) {
    if (p->pid == pid && p->start_ticks == stat->start_ticks) return false;
  }
  auto p = std::make_unique<TrackedProcess>();
  p->pid = pid;
  p->ppid = ppid != 0 ? ppid : static_cast<int>(stat->ppid);
  p->start_ticks = stat->start_ticks;
  if (auto parent = alive.find(p->ppid); parent != alive.end()) parent->second->had_children = true;
  p->first_seen_ns = now_ns;
  std::snprintf(path, sizeof path, "/proc/%d/statm", pid);
  if (!p->statm.open(path, O_RDONLY).empty()) return false;
  std::snprintf(path, sizeof path, "/proc/%d/status", pid);
  if (!p->status.open(path, O_RDONLY).empty()) return false;
  if (options.reset_peaks) {
    std::snprintf(path, sizeof path, "/proc/%d/clear_refs", pid);
    const std::string error = p->clear_refs.open(path, O_WRONLY);
    p->reset_ok = error.empty();
    if (!p->reset_ok) p->reset_error = error.substr(error.rfind(": ") + 2);
  }
  std::snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
  p->cmdline.open(path, O_RDONLY);
  p->command.assign(1, '[');  // until the command line can be read: the name from stat
  p->command.append(stat->comm);
  p->command.push_back(']');
  refresh_command_locked(*p);
  if (options.cgroup.empty()) {  // the task directory is only needed for the children walk
    std::snprintf(path, sizeof path, "/proc/%d/task", pid);
    p->tasks = ::opendir(path);
  }
  // Born after the last reset (or just found): its VmHWM covers only this window.
  p->reset_in_window = p->reset_ok;
  if (options.reset_peaks && !p->reset_ok) {
    note_locked("pid " + std::to_string(pid) + " (" + p->command.substr(0, 60) +
                "): VmHWM reset refused: " + p->reset_error + "; its peaks are sampled");
  }
  ++window_processes;
  if (options.reset_peaks && !p->reset_ok) window_unreset = true;
  alive[pid] = p.get();
  processes.push_back(std::move(p));
  return true;
}

std::size_t ProcessTree::State::discover_locked(std::int64_t now_ns) {
  std::size_t found = 0;
  if (processes.empty() && options.root_pid > 0) {
    if (add_locked(options.root_pid, 0, now_ns)) ++found;
  }
  std::string buffer;
  if (cgroup_procs.is_open()) {
    // Opened anew each time: cgroup v1 keeps the pid list of an open cgroup.procs and
    // answers a re-read from offset 0 with it (stale for about a second).
    detail::ProcFile procs;
    if (procs.open(cgroup_procs_path.c_str(), O_RDONLY).empty() && read_all(procs, buffer)) {
      std::vector<int> pids;
      detail::for_each_pid(buffer, [&](int pid) { pids.push_back(pid); });
      for (int pid : pids) {
        if (alive.count(pid) == 0 && add_locked(pid, 0, now_ns)) ++found;
      }
    }
    return found;
  }
  // Walk: children of every thread of every followed process, new ones walked in turn.
  std::vector<TrackedProcess*> queue;
  for (auto& [pid, p] : alive) queue.push_back(p);
  for (std::size_t i = 0; i < queue.size(); ++i) {
    TrackedProcess& p = *queue[i];
    if (p.tasks == nullptr) continue;
    ::rewinddir(p.tasks);
    std::vector<int> tids;
    while (const dirent* entry = ::readdir(p.tasks)) {
      if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
      tids.push_back(std::atoi(entry->d_name));
    }
    std::map<int, detail::ProcFile> files;
    std::vector<int> children;
    for (int tid : tids) {
      auto it = p.children.find(tid);
      detail::ProcFile file;
      if (it != p.children.end()) {
        file = std::move(it->second);
      } else {
        char path[80];
        std::snprintf(path, sizeof path, "/proc/%d/task/%d/children", p.pid, tid);
        if (!file.open(path, O_RDONLY).empty()) continue;
      }
      if (read_all(file, buffer)) {
        detail::for_each_pid(buffer, [&](int child) { children.push_back(child); });
      }
      files.emplace(tid, std::move(file));
    }
    p.children = std::move(files);  // threads that ended drop out here
    for (int child : children) {
      if (alive.count(child) != 0) continue;
      if (add_locked(child, p.pid, now_ns)) {
        ++found;
        queue.push_back(alive[child]);
      }
    }
  }
  return found;
}

void ProcessTree::State::refresh_command_locked(TrackedProcess& p) {
  if (!p.cmdline.is_open()) return;
  char buffer[256];
  const long n = p.cmdline.read_into(buffer, sizeof buffer);
  if (n <= 0) return;  // a kernel thread or a zombie: keep what we have
  std::string command(buffer, static_cast<std::size_t>(n));
  std::replace(command.begin(), command.end(), '\0', ' ');
  while (!command.empty() && command.back() == ' ') command.pop_back();
  if (command.empty()) return;
  if (static_cast<std::size_t>(n) == sizeof buffer) command += "...";
  p.command = std::move(command);
}

double ProcessTree::State::read_rss_locked(TrackedProcess& p) {
  char buffer[128];
  const long n = p.alive() ? p.statm.read_into(buffer, sizeof buffer) : -1;
  std::uint64_t size = 0, resident = 0;
  if (n < 0 || !parse_statm({buffer, static_cast<std::size_t>(n)}, size, resident) || size == 0)
    return kNaN;
  return static_cast<double>(resident) * kPageBytes;
}

void ProcessTree::State::mark_gone_locked(TrackedProcess& p, std::int64_t now_ns) {
  if (!p.alive()) return;
  p.gone_ns = now_ns;
  alive.erase(p.pid);
  p.statm = {};
  p.status = {};
  p.clear_refs = {};
  p.cmdline = {};
  p.children.clear();
  if (p.tasks != nullptr) {
    ::closedir(p.tasks);
    p.tasks = nullptr;
  }
  // What it used between its last read and its exit is not known (unless wait4 tells).
  p.part_exact = false;
  if (std::isnan(p.rusage_maxrss)) p.lifetime_exact = false;
}

double ProcessTree::State::sample_locked(std::int64_t now_ns) {
  discover_locked(now_ns);
  double sum = 0;
  std::vector<TrackedProcess*> gone;
  for (auto& [pid, p] : alive) {
    const double rss = read_rss_locked(*p);
    if (std::isnan(rss)) {
      gone.push_back(p);  // exited (ESRCH) or a zombie (no memory map left)
      continue;
    }
    p->rss_bytes = rss;
    p->part_peak = nan_max(p->part_peak, rss);
    p->lifetime_peak = nan_max(p->lifetime_peak, rss);
    sum += rss;
  }
  for (TrackedProcess* p : gone) mark_gone_locked(*p, now_ns);
  tree_rss_max = nan_max(tree_rss_max, sum);
  return sum;
}

double ProcessTree::State::read_hwm_locked(TrackedProcess& p, std::int64_t now_ns,
                                          bool into_part) {
  if (!p.alive()) return kNaN;
  char buffer[4096];
  const long n = p.status.read_into(buffer, sizeof buffer);
  const auto hwm =
      n < 0 ? std::nullopt : detail::parse_kb_field({buffer, static_cast<std::size_t>(n)}, "VmHWM");
  if (!hwm) {  // exited, or a zombie (no Vm lines)
    mark_gone_locked(p, now_ns);
    return kNaN;
  }
  const double bytes = static_cast<double>(*hwm);
  p.lifetime_peak = nan_max(p.lifetime_peak, bytes);
  // Without a reset VmHWM is the lifetime peak, not this window's.
  if (into_part && p.reset_in_window) p.part_peak = nan_max(p.part_peak, bytes);
  return bytes;
}

// --- ProcessTree --------------------------------------------------------------------------

ProcessTree::ProcessTree(ProcessTreeOptions options) : state_(std::make_shared<State>()) {
  state_->options = std::move(options);
  if (!state_->options.reset_peaks) {
    state_->note_locked(
        "process tree: VmHWM resets off (--no-peak-reset): per-process peaks are sampled; "
        "getrusage()/time -v maxrss of the processes is left untouched");
  }
}

ProcessTree::~ProcessTree() = default;

void ProcessTree::set_root(int pid) {
  std::lock_guard lock(state_->mutex);
  state_->options.root_pid = pid;
}

int ProcessTree::root() const {
  std::lock_guard lock(state_->mutex);
  return state_->options.root_pid;
}

bool ProcessTree::contains(int pid) const {
  std::lock_guard lock(state_->mutex);
  return state_->alive.count(pid) != 0;
}

void ProcessTree::process_exited(int pid, double rusage_maxrss_bytes) {
  std::lock_guard lock(state_->mutex);
  const std::int64_t now = Step::now_ns();
  // The newest entry of that pid (an older one may be a reused pid's).
  for (auto it = state_->processes.rbegin(); it != state_->processes.rend(); ++it) {
    TrackedProcess& p = **it;
    if (p.pid != pid) continue;
    state_->mark_gone_locked(p, now);
    if (std::isnan(rusage_maxrss_bytes)) return;
    p.rusage_maxrss = rusage_maxrss_bytes;
    // wait4's ru_maxrss is the largest of the process (its image before exec included, and
    // only since the last VmHWM reset) and of every descendant it waited for. For a process
    // that never had children it is its own last window: with the peaks read before every
    // reset, that completes its lifetime peak.
    if (p.had_children) return;
    p.lifetime_peak = nan_max(p.lifetime_peak, rusage_maxrss_bytes);
    p.lifetime_exact = state_->options.reset_peaks ? p.reset_ok : true;
    return;
  }
  // The root ended before it was ever seen (a program that lives less than a sample): wait4
  // is all there is (its figure includes the descendants it waited for).
  if (pid != state_->options.root_pid || std::isnan(rusage_maxrss_bytes)) return;
  auto p = std::make_unique<TrackedProcess>();
  p->pid = pid;
  p->command = "[pid " + std::to_string(pid) + ", ended before it was seen]";
  p->first_seen_ns = p->gone_ns = now;
  p->rusage_maxrss = p->lifetime_peak = rusage_maxrss_bytes;
  p->lifetime_exact = false;
  p->rusage_only = true;
  state_->processes.push_back(std::move(p));
}

std::vector<std::string> ProcessTree::notes() const {
  std::lock_guard lock(state_->mutex);
  std::vector<std::string> notes;
  if (state_->options.cgroup.empty()) {
    notes.push_back(
        "no memory cgroup: the tree's exact peak is known while it is one process; otherwise "
        "tree.rss_bytes peaks are sampled and each process's exact peak is in the step's "
        "figure_parts");
  } else if (state_->cgroup_error.empty()) {
    notes.push_back(
        "cgroup v" + std::to_string(state_->options.cgroup_version == 2 ? 2 : 1) + " " +
        state_->options.cgroup.string() +
        ": cgroup.usage_bytes counts the tree's anonymous memory, the page cache it brought "
        "in and kernel memory charged to it (page tables, ...); its peak is exact");
  }
  for (const std::string& n : state_->notes) notes.push_back(n);
  return notes;
}

Attachment ProcessTree::take_summary() {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  s.open_locked();
  const std::int64_t now = Step::now_ns();
  s.sample_locked(now);
  nlohmann::json processes = nlohmann::json::array();
  double lifetime_sum = 0;
  for (auto& p : s.processes) {
    if (p->alive()) {
      // VmHWM now: in reset mode the peak since the last reset, else the lifetime peak.
      s.read_hwm_locked(*p, now);
      s.refresh_command_locked(*p);
    }
    const bool exact = (s.options.reset_peaks ? p->reset_ok : true) && p->lifetime_exact;
    const char* source = p->rusage_only ? "rusage" : exact ? "exact" : "sampled";
    nlohmann::json item = {{"pid", p->pid},
                           {"ppid", p->ppid},
                           {"command", p->command},
                           {"first_seen_s", (p->first_seen_ns - s.period_start_ns) * 1e-9},
                           {"exited", !p->alive()},
                           {"lifetime_peak_bytes", p->lifetime_peak},
                           {"lifetime_peak_source", source},
                           {"rss_bytes", p->alive() ? p->rss_bytes : 0.0}};
    if (!std::isnan(p->rusage_maxrss)) item["rusage_maxrss_bytes"] = p->rusage_maxrss;
    if (!p->reset_error.empty()) item["reset_refused"] = p->reset_error;
    if (!std::isnan(p->lifetime_peak)) lifetime_sum += p->lifetime_peak;
    processes.push_back(std::move(item));
  }
  nlohmann::json data = {{"root_pid", s.options.root_pid},
                         {"peak_resets", s.options.reset_peaks},
                         {"processes", std::move(processes)},
                         {"sum_of_lifetime_peaks_bytes", lifetime_sum},
                         {"max_sampled_tree_rss_bytes", s.tree_rss_max}};
  if (s.cgroup_usage.is_open()) {
    char buffer[64];
    if (s.cgroup_peak.is_open()) {
      const long n = s.cgroup_peak.read_into(buffer, sizeof buffer);
      std::size_t pos = 0;
      if (n > 0) {
        if (auto v = detail::parse_decimal({buffer, static_cast<std::size_t>(n)}, pos))
          s.cgroup_lifetime_peak = nan_max(s.cgroup_lifetime_peak, static_cast<double>(*v));
      }
    }
    data["cgroup"] = {{"path", s.options.cgroup.string()},
                      {"version", s.options.cgroup_version == 2 ? 2 : 1},
                      {"lifetime_peak_bytes", s.cgroup_lifetime_peak},
                      {"lifetime_peak_source", s.cgroup_reset_ok ? "exact" : "sampled"}};
  }
  // The next period starts now: gone processes are reported once, live ones restart.
  s.processes.erase(std::remove_if(s.processes.begin(), s.processes.end(),
                                   [](const auto& p) { return !p->alive(); }),
                    s.processes.end());
  for (auto& p : s.processes) {
    p->lifetime_peak = p->rss_bytes;
    p->lifetime_exact = true;
    p->first_seen_ns = now;
    if (s.options.reset_peaks && p->reset_ok) {
      p->reset_ok = p->clear_refs.write_text("5") == 0;
      p->reset_in_window = p->reset_ok;
    }
  }
  s.tree_rss_max = kNaN;
  s.cgroup_lifetime_peak = kNaN;
  if (s.cgroup_reset_ok) {
    s.cgroup_reset_ok =
        s.cgroup_peak.write_text(s.options.cgroup_version == 2 ? "reset\n" : "0") == 0;
  }
  s.period_start_ns = now;
  return {"process_tree", "", std::move(data)};
}

}  // namespace genscope
