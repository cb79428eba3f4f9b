// merge_runs(): the ranks of one distributed generation on one clock, with each step's
// spread across the ranks (include/genscope/merge.hpp, docs/distributed.md).
#include "genscope/merge.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "genscope/error.hpp"

namespace genscope {
namespace {

std::string who(const Run& run) {
  std::string out = "run " + run.id.substr(0, 8);
  if (run.distributed) {
    out += run.distributed->role == "launcher" ? " (launcher)"
                                               : " (rank " + std::to_string(run.distributed->rank) + ")";
  }
  return out;
}

[[noreturn]] void not_one(const std::string& why) { throw Error("RunsNotOneGeneration", why); }

int rank_of(const Run& run) { return run.distributed ? run.distributed->rank : -1; }

std::int64_t end_unix_ns(const Run& run) { return run.start_unix_ns + run.duration_ns; }

// Each step's path: the names from the top-level step down, joined by " / ".
std::vector<std::string> step_paths(const Run& run) {
  std::vector<std::string> paths(run.steps.size());
  for (std::size_t i = 0; i < run.steps.size(); ++i) {
    const StepRecord& s = run.steps[i];
    std::string path = s.name;
    int parent = s.parent_id;
    for (std::size_t guard = 0; parent >= 0 && guard < run.steps.size(); ++guard) {
      const auto it = std::find_if(run.steps.begin(), run.steps.end(),
                                   [&](const StepRecord& p) { return p.id == parent; });
      if (it == run.steps.end()) break;
      path = it->name + " / " + path;
      parent = it->parent_id;
    }
    paths[i] = std::move(path);
  }
  return paths;
}

// (path, occurrence) -> step index, for one run.
std::map<std::pair<std::string, int>, std::size_t> index_steps(const Run& run,
                                                              std::vector<std::pair<std::string, int>>* order) {
  std::map<std::pair<std::string, int>, std::size_t> out;
  std::map<std::string, int> seen;
  const std::vector<std::string> paths = step_paths(run);
  for (std::size_t i = 0; i < paths.size(); ++i) {
    const std::pair<std::string, int> key{paths[i], seen[paths[i]]++};
    out.emplace(key, i);
    if (order != nullptr) order->push_back(key);
  }
  return out;
}

std::int64_t median(std::vector<std::int64_t> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  if (n == 0) return 0;
  return n % 2 == 1 ? v[n / 2] : v[n / 2 - 1] + (v[n / 2] - v[n / 2 - 1]) / 2;
}

bool memory_figure(const MetricFigures& m) {
  if (m.unit != Unit::kBytes) return false;
  return m.name.rfind("system.", 0) != 0;  // the machine's, the same for every rank on it
}

void check_one_generation(const std::vector<Run>& ranks, const std::optional<Run>& launcher) {
  if (ranks.empty()) not_one("no rank run among the runs given (only a launcher's)");
  const DistributedInfo& first = *ranks.front().distributed;
  std::set<int> seen;
  for (const Run& r : ranks) {
    const DistributedInfo& d = *r.distributed;
    if (d.group != first.group) {
      not_one(who(r) + " belongs to group '" + d.group + "', " + who(ranks.front()) +
              " to group '" + first.group + "'");
    }
    if (d.world_size != first.world_size) {
      not_one(who(r) + " has world size " + std::to_string(d.world_size) + ", " +
              who(ranks.front()) + " " + std::to_string(first.world_size));
    }
    if (!seen.insert(d.rank).second) {
      not_one("two runs of rank " + std::to_string(d.rank) +
              " (several generations? merge one generation at a time)");
    }
  }
  if (launcher && launcher->distributed->group != first.group) {
    not_one(who(*launcher) + " launched group '" + launcher->distributed->group + "', the ranks are of group '" +
            first.group + "'");
  }
  // A group named by MASTER_ADDR:MASTER_PORT (or by nothing) is the same for every launch on
  // that address: the ranks of one launch are alive together, so their runs overlap.
  if (first.group_source == "master" || first.group_source == "process_group" || first.group.empty()) {
    const auto latest = std::max_element(ranks.begin(), ranks.end(), [](const Run& a, const Run& b) {
      return a.start_unix_ns < b.start_unix_ns;
    });
    const auto earliest_end = std::min_element(ranks.begin(), ranks.end(), [](const Run& a, const Run& b) {
      return end_unix_ns(a) < end_unix_ns(b);
    });
    if (latest->start_unix_ns > end_unix_ns(*earliest_end)) {
      not_one(who(*latest) + " started after " + who(*earliest_end) + " ended; group '" + first.group +
              "' is named by " + (first.group.empty() ? "nothing" : "its address only") +
              ", so runs that never overlap are different launches");
    }
  }
}

// The first step every rank has that is marked as a barrier (label "distributed.barrier").
std::optional<std::pair<std::string, int>> common_barrier(
    const std::vector<Run>& ranks,
    const std::vector<std::map<std::pair<std::string, int>, std::size_t>>& indexes,
    const std::vector<std::pair<std::string, int>>& order) {
  for (const auto& key : order) {
    bool everywhere = true;
    for (std::size_t r = 0; r < ranks.size() && everywhere; ++r) {
      const auto it = indexes[r].find(key);
      everywhere = it != indexes[r].end() && ranks[r].steps[it->second].labels.count("distributed.barrier") > 0;
    }
    if (everywhere) return key;
  }
  return std::nullopt;
}

// The launcher's process tree (its "process_tree" attachment, docs/run.md): pid -> (ppid,
// lifetime peak). Entries that are not what genscope run writes are left out.
std::map<int, std::pair<int, double>> launcher_tree(const Run& launcher) {
  std::map<int, std::pair<int, double>> out;
  for (const Attachment& a : launcher.attachments) {
    if (a.type != "process_tree" || !a.data.is_object()) continue;
    const auto processes = a.data.find("processes");
    if (processes == a.data.end() || !processes->is_array()) continue;
    for (const nlohmann::json& p : *processes) {
      if (!p.is_object()) continue;
      const auto pid = p.find("pid"), ppid = p.find("ppid"), peak = p.find("lifetime_peak_bytes");
      if (pid == p.end() || !pid->is_number_integer() || ppid == p.end() || !ppid->is_number_integer()) continue;
      const double bytes = peak != p.end() && peak->is_number() ? peak->get<double>() : NAN;
      out[pid->get<int>()] = {ppid->get<int>(), bytes};
    }
  }
  return out;
}

// The rank's process and its descendants in the tree: count and summed lifetime peaks.
std::pair<int, double> rank_subtree(const std::map<int, std::pair<int, double>>& tree, int pid) {
  if (pid <= 0 || tree.count(pid) == 0) return {0, NAN};
  int count = 0;
  double sum = 0;
  bool any = false;
  for (const auto& [p, info] : tree) {
    // Walk up to the root (bounded: a malformed tree may have a cycle).
    int at = p;
    for (std::size_t hops = 0; hops <= tree.size() && at > 0; ++hops) {
      if (at == pid) {
        ++count;
        if (!std::isnan(info.second)) {
          sum += info.second;
          any = true;
        }
        break;
      }
      const auto up = tree.find(at);
      if (up == tree.end()) break;
      at = up->second.first;
    }
  }
  return {count, any ? sum : NAN};
}

}  // namespace

MergedRun merge_runs(std::vector<Run> runs, const MergeOptions& options) {
  if (!(options.straggler_margin >= 0) || !std::isfinite(options.straggler_margin)) {
    throw Error("InvalidMergeOptions", "the straggler margin must be a fraction >= 0, not " +
                                           std::to_string(options.straggler_margin));
  }
  MergedRun merged;
  merged.straggler_margin = options.straggler_margin;
  for (Run& run : runs) {
    if (!run.distributed) {
      not_one(who(run) + " has no rank: it was not recorded in a distributed job "
                         "(RANK/WORLD_SIZE unset, no process group)");
    }
    if (run.distributed->role == "launcher") {
      if (merged.launcher) not_one("two launcher runs: " + who(*merged.launcher) + " and " + who(run));
      merged.launcher = std::move(run);
    } else {
      merged.runs.push_back(std::move(run));
    }
  }
  std::sort(merged.runs.begin(), merged.runs.end(),
            [](const Run& a, const Run& b) { return rank_of(a) < rank_of(b); });
  check_one_generation(merged.runs, merged.launcher);
  const DistributedInfo& first = *merged.runs.front().distributed;
  merged.group = first.group;
  merged.group_source = first.group_source;
  merged.world_size = first.world_size;

  std::vector<std::map<std::pair<std::string, int>, std::size_t>> indexes;
  std::vector<std::pair<std::string, int>> order;
  std::set<std::pair<std::string, int>> ordered;
  for (std::size_t r = 0; r < merged.runs.size(); ++r) {
    std::vector<std::pair<std::string, int>> keys;
    indexes.push_back(index_steps(merged.runs[r], &keys));
    // The lowest rank's steps in its order, then those only later ranks have.
    for (auto& k : keys) {
      if (ordered.insert(k).second) order.push_back(std::move(k));
    }
  }

  // Clocks: each run's UTC start; refined, where every rank passed the same barrier step, by
  // shifting each rank so that the barrier ends when it ends on the lowest rank.
  std::vector<std::int64_t> shift(merged.runs.size(), 0);
  if (const auto barrier = common_barrier(merged.runs, indexes, order)) {
    const auto barrier_end = [&](std::size_t r) {
      const StepRecord& s = merged.runs[r].steps[indexes[r].at(*barrier)];
      return merged.runs[r].start_unix_ns + s.start_offset_ns + s.duration_ns;
    };
    for (std::size_t r = 1; r < merged.runs.size(); ++r) shift[r] = barrier_end(0) - barrier_end(r);
    merged.alignment = "barrier: " + barrier->first + " #" + std::to_string(barrier->second);
  }
  std::int64_t origin = merged.runs.front().start_unix_ns + shift.front();
  for (std::size_t r = 0; r < merged.runs.size(); ++r) {
    origin = std::min(origin, merged.runs[r].start_unix_ns + shift[r]);
  }
  if (merged.launcher) origin = std::min(origin, merged.launcher->start_unix_ns);

  for (std::size_t r = 0; r < merged.runs.size(); ++r) {
    const Run& run = merged.runs[r];
    MergedRank rank;
    rank.rank = run.distributed->rank;
    rank.host = run.host.hostname;
    rank.run_id = run.id;
    rank.clock_shift_ns = shift[r];
    rank.offset_ns = run.start_unix_ns + shift[r] - origin;
    rank.duration_ns = run.duration_ns;
    for (const StepRecord& s : run.steps) {
      for (const MetricFigures& m : s.metrics) {
        if (!memory_figure(m) || std::isnan(m.peak)) continue;
        auto [it, fresh] = rank.peak_bytes.emplace(m.name, m.peak);
        if (!fresh) it->second = std::max(it->second, m.peak);
      }
    }
    merged.ranks.push_back(std::move(rank));
  }
  if (merged.launcher) {
    const auto tree = launcher_tree(*merged.launcher);
    for (std::size_t r = 0; r < merged.runs.size(); ++r) {
      const auto [count, peak] = rank_subtree(tree, merged.runs[r].distributed->pid);
      merged.ranks[r].tree_processes = count;
      if (!std::isnan(peak)) merged.ranks[r].peak_bytes["launcher.tree_rss_bytes"] = peak;
    }
  }

  for (const auto& key : order) {
    StepSpread spread;
    spread.path = key.first;
    spread.occurrence = key.second;
    std::vector<std::int64_t> present;
    for (std::size_t r = 0; r < merged.runs.size(); ++r) {
      const auto it = indexes[r].find(key);
      if (it != indexes[r].end() && present.empty()) spread.kind = merged.runs[r].steps[it->second].kind;
      if (it != indexes[r].end() && merged.runs[r].steps[it->second].labels.count("distributed.barrier") > 0)
        spread.barrier = true;
      const std::int64_t d = it == indexes[r].end() ? -1 : merged.runs[r].steps[it->second].duration_ns;
      spread.duration_ns.push_back(d);
      if (d >= 0) present.push_back(d);
    }
    spread.min_ns = *std::min_element(present.begin(), present.end());
    spread.max_ns = *std::max_element(present.begin(), present.end());
    spread.median_ns = median(present);
    for (std::size_t r = 0; r < merged.runs.size(); ++r) {
      if (spread.duration_ns[r] == spread.max_ns) {
        spread.slowest_rank = merged.ranks[r].rank;
        break;
      }
    }
    spread.excess = spread.median_ns > 0
                        ? static_cast<double>(spread.max_ns - spread.median_ns) / static_cast<double>(spread.median_ns)
                        : 0.0;
    spread.straggler = !spread.barrier && present.size() >= 2 && spread.excess > options.straggler_margin;
    merged.steps.push_back(std::move(spread));
  }
  return merged;
}

}  // namespace genscope
