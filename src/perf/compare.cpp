// Run comparison: per-step medians, change, speed-up factor, memory change, and a
// noise-aware verdict (Mann-Whitney U at alpha AND a minimum relative effect).
#include "genscope/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "genscope/statistics.hpp"
#include "genscope/validation.hpp"
#include "perf/perf_internal.hpp"

namespace genscope {
namespace {

constexpr const char* kRunScope = "(run)";
constexpr std::size_t kMinGroup = 3;

struct Samples {
  std::vector<double> duration_ns;
  std::vector<double> peak_bytes;
};

// Durations and memory peaks per step name (first occurrence per run), plus "(run)".
std::map<std::string, Samples> collect(std::span<const Run> runs,
                                       std::vector<std::string>& order) {
  std::map<std::string, Samples> out;
  auto note = [&](const std::string& name) {
    if (std::find(order.begin(), order.end(), name) == order.end()) order.push_back(name);
  };
  for (const auto& run : runs) {
    note(kRunScope);
    double run_peak = kNaN;
    std::vector<std::string> seen;
    for (const auto& s : run.steps) {
      const double p = detail::step_memory_peak(s);
      if (!std::isnan(p) && (std::isnan(run_peak) || p > run_peak)) run_peak = p;
      if (std::find(seen.begin(), seen.end(), s.name) != seen.end()) continue;
      seen.push_back(s.name);
      note(s.name);
      auto& samples = out[s.name];
      samples.duration_ns.push_back(static_cast<double>(s.duration_ns));
      if (!std::isnan(p)) samples.peak_bytes.push_back(p);
    }
    auto& total = out[kRunScope];
    total.duration_ns.push_back(static_cast<double>(run.duration_ns));
    if (!std::isnan(run_peak)) total.peak_bytes.push_back(run_peak);
  }
  return out;
}

StepComparison compare_step(const std::string& name, const Samples* before, const Samples* after,
                            const CompareOptions& options) {
  StepComparison c;
  c.step = name;
  c.before_runs = before ? before->duration_ns.size() : 0;
  c.after_runs = after ? after->duration_ns.size() : 0;
  if (c.before_runs == 0 || c.after_runs == 0) {
    c.verdict = "missing";
    if (before) c.before_ns = median(before->duration_ns);
    if (after) c.after_ns = median(after->duration_ns);
    return c;
  }
  c.before_ns = median(before->duration_ns);
  c.after_ns = median(after->duration_ns);
  if (c.before_ns > 0) {
    c.change_percent = (c.after_ns - c.before_ns) / c.before_ns * 100;
    c.improvement_percent = -c.change_percent;
  }
  if (c.after_ns > 0) c.factor = c.before_ns / c.after_ns;
  c.before_peak_bytes = median(before->peak_bytes);
  c.after_peak_bytes = median(after->peak_bytes);
  c.memory_change_bytes = c.after_peak_bytes - c.before_peak_bytes;
  const bool large = std::fabs(c.change_percent) > options.min_effect * 100;
  bool decided = large;
  if (c.before_runs >= kMinGroup && c.after_runs >= kMinGroup) {
    c.p_value = mann_whitney_u(before->duration_ns, after->duration_ns).p_value;
    const Interval ci = bootstrap_median_ratio(before->duration_ns, after->duration_ns);
    c.ratio_low = ci.low;
    c.ratio_high = ci.high;
    decided = large && c.p_value < options.alpha;
  }
  c.verdict = !decided ? "unchanged" : c.change_percent < 0 ? "faster" : "slower";
  c.significant = c.verdict == "faster" && c.improvement_percent > options.significant_percent;
  return c;
}

void fill_scores(std::span<const Run> runs, const Targets* targets, double& score, bool& met) {
  if (targets == nullptr || runs.empty()) return;
  std::vector<double> scores;
  met = true;
  for (const auto& r : runs) {
    const Validation v = validate(r, *targets);
    if (!std::isnan(v.score)) scores.push_back(v.score);
    met = met && v.met;
  }
  score = median(scores);
}

std::string fmt_seconds(double ns) {
  if (std::isnan(ns)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f s", ns / 1e9);
  return buf;
}

}  // namespace

RunComparison compare_groups(std::span<const Run> before, std::span<const Run> after,
                             const Targets* targets, const CompareOptions& options) {
  RunComparison result;
  for (const auto& r : before) result.before_ids.push_back(r.id);
  for (const auto& r : after) result.after_ids.push_back(r.id);
  std::vector<std::string> order_before, order_after;
  const auto b = collect(before, order_before);
  const auto a = collect(after, order_after);
  std::vector<std::string> order = order_after;
  for (const auto& n : order_before)
    if (std::find(order.begin(), order.end(), n) == order.end()) order.push_back(n);
  for (const auto& name : order) {
    const auto ib = b.find(name);
    const auto ia = a.find(name);
    result.steps.push_back(compare_step(name, ib == b.end() ? nullptr : &ib->second,
                                        ia == a.end() ? nullptr : &ia->second, options));
  }
  fill_scores(before, targets, result.before_score, result.before_met);
  fill_scores(after, targets, result.after_score, result.after_met);
  return result;
}

RunComparison compare_runs(const Run& before, const Run& after, const Targets* targets,
                           const CompareOptions& options) {
  return compare_groups(std::span<const Run>(&before, 1), std::span<const Run>(&after, 1),
                        targets, options);
}

nlohmann::json to_json(const RunComparison& c) {
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& s : c.steps)
    steps.push_back({{"step", s.step},
                     {"before_runs", s.before_runs},
                     {"after_runs", s.after_runs},
                     {"before_ns", s.before_ns},
                     {"after_ns", s.after_ns},
                     {"change_percent", s.change_percent},
                     {"improvement_percent", s.improvement_percent},
                     {"factor", s.factor},
                     {"before_peak_bytes", s.before_peak_bytes},
                     {"after_peak_bytes", s.after_peak_bytes},
                     {"memory_change_bytes", s.memory_change_bytes},
                     {"p_value", s.p_value},
                     {"ratio_ci95", {s.ratio_low, s.ratio_high}},
                     {"significant", s.significant},
                     {"verdict", s.verdict}});
  return {{"schema", "genscope.comparison/1"},
          {"before", c.before_ids},
          {"after", c.after_ids},
          {"steps", steps},
          {"targets",
           {{"before_score", c.before_score},
            {"after_score", c.after_score},
            {"score_change", c.after_score - c.before_score},
            {"before_met", c.before_met},
            {"after_met", c.after_met}}}};
}

std::string render_comparison(const RunComparison& c) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-24s %12s %12s %9s %7s %10s  %s\n", "step", "before",
                "after", "change", "factor", "p", "verdict");
  out += line;
  for (const auto& s : c.steps) {
    char p[16] = "-";
    if (!std::isnan(s.p_value)) std::snprintf(p, sizeof p, "%.4f", s.p_value);
    std::snprintf(line, sizeof line, "%-24s %12s %12s %+8.1f%% %6.2fx %10s  %s%s\n",
                  s.step.substr(0, 24).c_str(), fmt_seconds(s.before_ns).c_str(),
                  fmt_seconds(s.after_ns).c_str(), s.change_percent, s.factor, p,
                  s.verdict.c_str(), s.significant ? " (significant)" : "");
    out += line;
  }
  if (!std::isnan(c.before_score) || !std::isnan(c.after_score)) {
    std::snprintf(line, sizeof line, "score %.1f -> %.1f (%+.1f), target met %s -> %s\n",
                  c.before_score, c.after_score, c.after_score - c.before_score,
                  c.before_met ? "yes" : "no", c.after_met ? "yes" : "no");
    out += line;
  }
  return out;
}

}  // namespace genscope
