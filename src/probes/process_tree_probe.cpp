// The probe of a ProcessTree (name "process_tree"): columns tree.rss_bytes, tree.processes
// and, with a cgroup, cgroup.usage_bytes; per-process parts of tree.rss_bytes.
//
// Exactness of tree.rss_bytes: the sum of the processes' VmHWM is the tree's peak only
// when one process lived in the window (peaks of several processes need not coincide, so
// their sum only bounds the tree's peak from above). read_peaks() therefore answers NaN for
// a window that saw several processes, and the monitor falls back to the sampled peak for
// the steps open in it; the cgroup column stays exact for any number of processes.
#include <cmath>

#include "genscope/process_tree.hpp"
#include "genscope/step.hpp"
#include "probes/process_tree_state.hpp"

namespace genscope {
namespace {

double read_counter(const detail::ProcFile& file) {
  char buffer[64];
  const long n = file.read_into(buffer, sizeof buffer);
  if (n <= 0) return kNaN;
  std::size_t pos = 0;
  const auto value = detail::parse_decimal({buffer, static_cast<std::size_t>(n)}, pos);
  return value ? static_cast<double>(*value) : kNaN;
}

class ProcessTreeProbe final : public Probe {
 public:
  explicit ProcessTreeProbe(std::shared_ptr<ProcessTree::State> state) : state_(std::move(state)) {
    const bool cgroup = !state_->options.cgroup.empty();
    metrics_.push_back({"tree.rss_bytes", Unit::kBytes, state_->options.reset_peaks});
    metrics_.push_back({"tree.processes", Unit::kCount, false});
    if (cgroup) metrics_.push_back({"cgroup.usage_bytes", Unit::kBytes, true});
  }

  std::string name() const override { return "process_tree"; }
  const std::vector<MetricInfo>& metrics() const override { return metrics_; }
  bool has_parts() const override { return true; }

  ProbeStatus open() override {
    std::lock_guard lock(state_->mutex);
    if (state_->options.root_pid <= 0)
      return ProbeStatus::failure("process tree: no root process");
    state_->open_locked();
    state_->discover_locked(Step::now_ns());
    if (state_->processes.empty()) {
      return ProbeStatus::failure("process tree: process " +
                                  std::to_string(state_->options.root_pid) + " not found");
    }
    return {};
  }

  ProbeStatus sample(std::span<double> out) override {
    std::lock_guard lock(state_->mutex);
    const double sum = state_->sample_locked(Step::now_ns());
    out[0] = sum;
    out[1] = static_cast<double>(state_->alive.size());
    if (out.size() > 2) {
      out[2] = state_->cgroup_usage.is_open() ? read_counter(state_->cgroup_usage) : kNaN;
      if (std::isnan(out[2]) && state_->cgroup_usage.is_open())
        return ProbeStatus::failure("process tree: cannot read the cgroup's usage");
    }
    return {};
  }

  ProbeStatus reset_peaks() override {
    ProcessTree::State& s = *state_;
    std::lock_guard lock(s.mutex);
    const std::int64_t now = Step::now_ns();
    s.discover_locked(now);
    std::vector<TrackedProcess*> live;
    for (auto& [pid, p] : s.alive) live.push_back(p);
    for (TrackedProcess* p : live) {
      if (!s.options.reset_peaks || !p->reset_ok) continue;
      // The peak of the window that ends here, for the lifetime peak, then the reset. (Its
      // part was read by read_parts() just before: the monitor calls it first.)
      s.read_hwm_locked(*p, now, false);
      if (!p->alive()) continue;
      if (const int rc = p->clear_refs.write_text("5"); rc != 0) {
        p->reset_ok = false;
        p->reset_error = detail::errno_text(-rc);
        s.note_locked("pid " + std::to_string(p->pid) + " (" + p->command.substr(0, 60) +
                      "): VmHWM reset refused: " + p->reset_error + "; its peaks are sampled");
      }
      p->reset_in_window = p->reset_ok;
    }
    s.window_processes = s.alive.size();
    s.window_start_ns = now;
    s.window_unreset = false;
    for (auto& [pid, p] : s.alive) s.window_unreset = s.window_unreset || !p->reset_in_window;
    if (s.cgroup_peak.is_open() && s.cgroup_reset_ok) {
      s.cgroup_lifetime_peak = std::isnan(s.cgroup_lifetime_peak)
                                   ? read_counter(s.cgroup_peak)
                                   : std::max(s.cgroup_lifetime_peak, read_counter(s.cgroup_peak));
      // v1: writing 0 to max_usage_in_bytes restarts it from the current usage; v2 (Linux
      // >= 6.12): any write to memory.peak restarts the peak seen through this descriptor.
      const char* reset = s.options.cgroup_version == 2 ? "reset\n" : "0";
      if (const int rc = s.cgroup_peak.write_text(reset); rc != 0) {
        s.cgroup_reset_ok = false;
        s.note_locked("cgroup: resetting the peak was refused (" + detail::errno_text(-rc) +
                      "); cgroup.usage_bytes peaks are sampled");
      }
    }
    s.cgroup_reset_in_window = s.cgroup_reset_ok;
    return {};
  }

  ProbeStatus read_peaks(std::span<double> out) override {
    for (double& v : out) v = kNaN;
    ProcessTree::State& s = *state_;
    std::lock_guard lock(s.mutex);
    const std::int64_t now = Step::now_ns();
    s.discover_locked(now);
    if (s.options.reset_peaks && s.window_processes == 1 && !s.window_unreset &&
        s.alive.size() == 1) {
      TrackedProcess& only = *s.alive.begin()->second;
      if (only.reset_in_window) out[0] = s.read_hwm_locked(only, now);
    } else if (s.options.reset_peaks && s.window_processes == 1 && !s.window_unreset &&
               s.alive.empty()) {
      // The window's only process ended in it and was reaped: wait4's ru_maxrss is its VmHWM
      // since the reset, i.e. the window's exact peak (a program failing in milliseconds).
      for (auto it = s.processes.rbegin(); it != s.processes.rend(); ++it) {
        const TrackedProcess& p = **it;
        if (p.alive() || p.gone_ns < s.window_start_ns) continue;
        if (p.reset_in_window && !p.had_children && !std::isnan(p.rusage_maxrss)) out[0] = p.rusage_maxrss;
        break;
      }
    }
    if (out.size() > 2 && s.cgroup_reset_in_window) {
      out[2] = read_counter(s.cgroup_peak);
      if (std::isnan(out[2]))
        return ProbeStatus::failure("process tree: cannot read the cgroup's peak");
    }
    return {};
  }

  ProbeStatus read_parts(std::vector<FigurePart>& out) override {
    out.clear();
    ProcessTree::State& s = *state_;
    std::lock_guard lock(s.mutex);
    const std::int64_t now = Step::now_ns();
    s.discover_locked(now);
    for (auto& p : s.processes) {
      if (!p->in_part_window) continue;
      if (p->alive() && s.options.reset_peaks && p->reset_ok) s.read_hwm_locked(*p, now);
      if (p->alive()) s.refresh_command_locked(*p);
      FigurePart part;
      part.metric = "tree.rss_bytes";
      part.key = p->key();
      part.info = {{"pid", p->pid}, {"ppid", p->ppid}, {"command", p->command}};
      if (!p->alive()) part.info["exited"] = true;
      part.peak = p->part_peak;
      part.exact = s.options.reset_peaks && p->reset_ok && p->reset_in_window && p->alive() &&
                   p->part_exact;
      out.push_back(std::move(part));
      // The next window starts from the value now (the last sample may be stale).
      p->part_peak = s.read_rss_locked(*p);
      p->part_exact = true;
      p->in_part_window = p->alive();
    }
    return {};
  }

 private:
  std::shared_ptr<ProcessTree::State> state_;
  std::vector<MetricInfo> metrics_;
};

}  // namespace

std::unique_ptr<Probe> ProcessTree::make_probe() {
  return std::make_unique<ProcessTreeProbe>(state_);
}

}  // namespace genscope
