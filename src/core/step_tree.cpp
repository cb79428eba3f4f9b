// The step tree's invariants: normalize_step_tree (the one builder's last word on every
// finished run), check_step_tree and summarize_step_time (docs/run-schema.md, "The step tree").
#include "genscope/step_tree.hpp"

#include <algorithm>
#include <set>
#include <string_view>
#include <tuple>

namespace genscope {
namespace {

std::int64_t end_of(const StepRecord& s) { return s.start_offset_ns + s.duration_ns; }

bool growable(const StepRecord& s) {
  return s.inferred || (!s.closed_by.empty() && s.closed_by != kClosedExplicit);
}

bool holds(const StepRecord& parent, const StepRecord& child) {
  return parent.start_offset_ns <= child.start_offset_ns && end_of(child) <= end_of(parent);
}

std::string ms(std::int64_t ns) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3f ms", static_cast<double>(ns) / 1e6);
  return buf;
}

void append_label(StepRecord& s, const std::string& key, const std::string& text) {
  std::string& v = s.labels[key];
  v = v.empty() ? text : v + "; " + text;
}

// Run length for the summary: the recorded duration, or the last step end of a live run.
std::int64_t run_length(const Run& run) {
  std::int64_t n = std::max<std::int64_t>(0, run.duration_ns);
  if (run.duration_ns <= 0) {
    for (const StepRecord& s : run.steps) n = std::max(n, end_of(s));
  }
  return n;
}

bool valid_closed_by(std::string_view c) {
  return c == kClosedExplicit || c == kClosedRunEnd ||
         (c.size() > std::string_view(kClosedInferredPrefix).size() &&
          c.substr(0, std::string_view(kClosedInferredPrefix).size()) == kClosedInferredPrefix);
}

}  // namespace

void normalize_step_tree(Run& run) {
  auto& steps = run.steps;
  const std::int64_t d = std::max<std::int64_t>(0, run.duration_ns);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    StepRecord& s = steps[i];
    if (s.closed_by.empty() && s.status != StepStatus::kRunning) s.closed_by = kClosedExplicit;
    if (s.parent_id < -1 || s.parent_id >= static_cast<int>(i) ||
        (s.parent_id >= 0 && steps[static_cast<std::size_t>(s.parent_id)].thread != s.thread)) {
      append_label(s, "tree.parent_dropped", "parent id " + std::to_string(s.parent_id) +
                                                 " names no earlier step of its thread");
      s.parent_id = -1;
    }
    s.duration_ns = std::max<std::int64_t>(0, s.duration_ns);
    if (run.duration_ns <= 0 && s.status == StepStatus::kRunning) continue;  // a live snapshot
    if (s.start_offset_ns < 0) {
      append_label(s, "tree.clamped", "started " + ms(-s.start_offset_ns) + " before the run");
      s.duration_ns = std::max<std::int64_t>(0, end_of(s));
      s.start_offset_ns = 0;
    }
    if (s.start_offset_ns > d) {
      append_label(s, "tree.clamped", "started " + ms(s.start_offset_ns - d) + " after the run ended");
      s.start_offset_ns = d;
      s.duration_ns = 0;
      s.closed_by = kClosedRunEnd;
    } else if (end_of(s) > d) {
      append_label(s, "tree.clamped", "cut " + ms(end_of(s) - d) + " at the run's end");
      s.duration_ns = d - s.start_offset_ns;
      s.closed_by = kClosedRunEnd;
    }
  }
  // Children before parents (a parent's id is always smaller), so a parent that grew is
  // checked against its own parent afterwards.
  for (std::size_t i = steps.size(); i-- > 0;) {
    StepRecord& c = steps[i];
    if (c.parent_id < 0) continue;
    StepRecord* p = &steps[static_cast<std::size_t>(c.parent_id)];
    if (holds(*p, c)) continue;
    const StepRecord* original = p;
    // The nearest ancestor that holds the child or may grow to.
    while (p != nullptr && !holds(*p, c) && !growable(*p)) {
      p = p->parent_id >= 0 ? &steps[static_cast<std::size_t>(p->parent_id)] : nullptr;
    }
    if (p != original) {
      append_label(c, "tree.reparented_from",
                   "step " + std::to_string(original->id) + " '" + original->name +
                       "', which does not hold it");
      c.parent_id = p != nullptr ? p->id : -1;
    }
    if (p != nullptr && !holds(*p, c)) {
      const std::int64_t start = std::min(p->start_offset_ns, c.start_offset_ns);
      const std::int64_t end = std::max(end_of(*p), end_of(c));
      append_label(*p, "tree.grown",
                   "by " + ms((p->start_offset_ns - start) + (end - end_of(*p))) +
                       " to hold step " + std::to_string(c.id) + " '" + c.name + "'");
      p->start_offset_ns = start;
      p->duration_ns = end - start;
    }
  }
}

StepTimeSummary summarize_step_time(const Run& run) {
  StepTimeSummary out;
  out.run_ns = run_length(run);
  const auto& steps = run.steps;
  std::vector<int> depth(steps.size(), 0);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const int p = steps[i].parent_id;
    if (p >= 0 && p < static_cast<int>(i)) depth[i] = depth[static_cast<std::size_t>(p)] + 1;
  }
  // Boundaries: +1 opens, -1 closes; clamped to the run.
  struct Edge {
    std::int64_t t;
    int open;  // 0 closes before 1 opens at the same time
    std::size_t step;
  };
  std::vector<Edge> edges;
  edges.reserve(steps.size() * 2);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const std::int64_t a = std::clamp<std::int64_t>(steps[i].start_offset_ns, 0, out.run_ns);
    const std::int64_t b = std::clamp<std::int64_t>(end_of(steps[i]), a, out.run_ns);
    if (b <= a) continue;
    edges.push_back({a, 1, i});
    edges.push_back({b, 0, i});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& x, const Edge& y) {
    return std::tie(x.t, x.open, x.step) < std::tie(y.t, y.open, y.step);
  });
  // The innermost active step: deepest, then latest started, then highest id.
  using Key = std::tuple<int, std::int64_t, std::size_t>;
  std::set<Key> active;
  std::int64_t t = 0;
  auto account = [&](std::int64_t until) {
    if (until <= t) return;
    if (active.empty()) {
      out.unattributed_ns += until - t;
      if (!out.gaps.empty() && out.gaps.back().second == t) {
        out.gaps.back().second = until;
      } else {
        out.gaps.emplace_back(t, until);
      }
    } else {
      const StepRecord& s = steps[std::get<2>(*active.rbegin())];
      out.by_kind_ns[s.kind] += until - t;
      if (s.inferred) out.inferred_ns += until - t;
    }
    t = until;
  };
  for (const Edge& e : edges) {
    account(e.t);
    const Key k{depth[e.step], steps[e.step].start_offset_ns, e.step};
    if (e.open != 0) {
      active.insert(k);
    } else {
      active.erase(k);
    }
  }
  account(out.run_ns);
  out.top_level_ns = out.run_ns - out.unattributed_ns;
  return out;
}

std::vector<std::string> check_step_tree(const Run& run) {
  std::vector<std::string> v;
  const auto& steps = run.steps;
  const bool finished = run.duration_ns > 0 ||
                        std::none_of(steps.begin(), steps.end(), [](const StepRecord& s) {
                          return s.status == StepStatus::kRunning;
                        });
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const StepRecord& s = steps[i];
    const std::string who = "step " + std::to_string(i) + " '" + s.name + "'";
    if (s.id != static_cast<int>(i)) v.push_back(who + " has id " + std::to_string(s.id));
    if (s.duration_ns < 0) v.push_back(who + " has a negative duration");
    if (s.parent_id < -1 || s.parent_id >= static_cast<int>(i)) {
      v.push_back(who + " names parent " + std::to_string(s.parent_id) + ", not an earlier step");
    } else if (s.parent_id >= 0) {
      const StepRecord& p = steps[static_cast<std::size_t>(s.parent_id)];
      if (p.thread != s.thread) v.push_back(who + " has a parent on another thread");
      if (!holds(p, s)) {
        v.push_back(who + " [" + ms(s.start_offset_ns) + ", " + ms(end_of(s)) +
                    "] is not within its parent " + std::to_string(p.id) + " [" +
                    ms(p.start_offset_ns) + ", " + ms(end_of(p)) + "]");
      }
    }
    if (!finished) continue;
    if (s.status == StepStatus::kRunning) v.push_back(who + " is still running in a finished run");
    if (s.start_offset_ns < 0 || end_of(s) > run.duration_ns) {
      v.push_back(who + " [" + ms(s.start_offset_ns) + ", " + ms(end_of(s)) +
                  "] lies outside its run [0, " + ms(run.duration_ns) + "]");
    }
    if (!s.closed_by.empty() && !valid_closed_by(s.closed_by)) {
      v.push_back(who + " has closed_by '" + s.closed_by + "'");
    }
  }
  const StepTimeSummary t = summarize_step_time(run);
  std::int64_t sum = t.unattributed_ns;
  for (const auto& [kind, ns] : t.by_kind_ns) sum += ns;
  if (sum != t.run_ns) {
    v.push_back("time by kind plus unattributed is " + ms(sum) + ", not the run's " + ms(t.run_ns));
  }
  std::int64_t gaps = 0;
  for (const auto& [a, b] : t.gaps) gaps += b - a;
  if (gaps != t.unattributed_ns) v.push_back("the gaps do not add up to the unattributed time");
  return v;
}

}  // namespace genscope
