// Target evaluation and scoring. Score of one target: 100 when met, else
// 100 * limit / actual (ceilings) or 100 * actual / floor (it/s); overall score: geometric
// mean of the measured targets' scores. Rationale: docs/validation.md.
#include "genscope/validation.hpp"

#include <algorithm>
#include <cmath>

#include "perf/perf_internal.hpp"

namespace genscope {
namespace {

void evaluate_scope(const Run& run, const Target& target, std::vector<TargetResult>& out) {
  const bool whole_run = target.step.empty();
  const std::string scope = whole_run ? "run" : target.step;
  const StepRecord* step = nullptr;
  if (!whole_run) {
    for (const auto& s : run.steps)
      if (s.name == target.step) {
        step = &s;
        break;
      }
  }
  auto push = [&](std::string name, double limit, double actual, bool ceiling) {
    TargetResult r;
    r.scope = scope;
    r.target = std::move(name);
    r.limit = limit;
    r.actual = actual;
    if (!whole_run && step == nullptr) {
      r.note = "step not found";
    } else if (std::isnan(actual)) {
      r.note = "not measured";
    } else {
      r.score = ceiling ? score_ceiling(actual, limit) : score_floor(actual, limit);
      r.met = ceiling ? actual <= limit : actual >= limit;
    }
    out.push_back(std::move(r));
    return &out.back();
  };
  const double duration = whole_run ? static_cast<double>(run.duration_ns)
                          : step    ? static_cast<double>(step->duration_ns)
                                    : kNaN;
  if (target.max_duration_ns) push("max_duration", *target.max_duration_ns, duration, true);
  if (target.window_max_ns) {
    TargetResult* r = push("window", *target.window_max_ns, duration, true);
    if (target.window_min_ns && duration < *target.window_min_ns)
      r->note = "below window minimum (met; check that no work was skipped)";
  }
  for (const auto& [metric, limit] : target.max_peak) {
    const double actual = whole_run ? detail::run_metric_max(run, metric)
                          : step    ? detail::step_metric_max(*step, metric)
                                    : kNaN;
    push("max_peak:" + metric, limit, actual, true);
  }
  if (target.min_iterations_per_second) {
    double actual = kNaN;
    if (step != nullptr) {
      actual = detail::iterations_per_second(*step);
    } else if (whole_run) {
      double count = 0, total_ns = 0;
      for (const auto& s : run.steps)
        if (s.kind == StepKind::kSampling)
          for (auto d : s.iteration_ns) {
            count += 1;
            total_ns += static_cast<double>(d);
          }
      if (total_ns > 0) actual = count / (total_ns / 1e9);
    }
    push("min_it_per_s", *target.min_iterations_per_second, actual, false);
  }
}

nlohmann::json result_json(const TargetResult& r) {
  nlohmann::json j = {{"scope", r.scope},   {"target", r.target},
                      {"limit", r.limit},   {"actual", r.actual},
                      {"met", r.met},       {"score", r.score}};
  if (!r.note.empty()) j["note"] = r.note;
  return j;
}

}  // namespace

double score_ceiling(double actual, double limit) noexcept {
  if (std::isnan(actual) || std::isnan(limit)) return kNaN;
  if (actual <= limit) return 100;
  return 100 * limit / actual;
}

double score_floor(double actual, double floor) noexcept {
  if (std::isnan(actual) || std::isnan(floor)) return kNaN;
  if (actual >= floor) return 100;
  return floor > 0 ? 100 * std::max(0.0, actual) / floor : 100;
}

Validation validate(const Run& run, const Targets& targets) {
  Validation v;
  v.architecture = detail::run_architecture(run);
  evaluate_scope(run, targets.run, v.results);
  for (const auto& t : targets.steps) evaluate_scope(run, t, v.results);
  double log_sum = 0;
  int measured = 0;
  bool time_missed = false;
  for (const auto& r : v.results) {
    if (std::isnan(r.score)) continue;
    ++measured;
    log_sum += std::log(std::max(r.score, 1e-9));
    if (!r.met) {
      v.met = false;
      if (r.target == "max_duration" || r.target == "window" || r.target == "min_it_per_s")
        time_missed = true;
    }
  }
  v.score = measured > 0 ? std::exp(log_sum / measured) : kNaN;
  if (v.met && measured > 0) v.score = 100;  // exact, no rounding drift
  v.diagnostics = diagnose(run, time_missed);
  v.recommendations = recommend(v.architecture, run, v.diagnostics);
  return v;
}

nlohmann::json to_json(const Validation& v) {
  nlohmann::json results = nlohmann::json::array();
  for (const auto& r : v.results) results.push_back(result_json(r));
  nlohmann::json diagnostics = nlohmann::json::array();
  for (const auto& d : v.diagnostics)
    diagnostics.push_back(
        {{"id", d.id}, {"step", d.step}, {"message", d.message}, {"evidence", d.evidence}});
  nlohmann::json recommendations = nlohmann::json::array();
  for (const auto& r : v.recommendations)
    recommendations.push_back({{"diagnostic", r.diagnostic},
                               {"step", r.step},
                               {"text", r.text},
                               {"evidence", r.evidence}});
  return {{"architecture", to_string(v.architecture)},
          {"met", v.met},
          {"score", v.score},
          {"results", results},
          {"diagnostics", diagnostics},
          {"recommendations", recommendations}};
}

nlohmann::json performance_report(const Run& run, const Targets& targets) {
  nlohmann::json j = to_json(validate(run, targets));
  nlohmann::json steps = nlohmann::json::object();
  for (const auto& t : targets.steps) steps[t.step] = to_json(t);
  j["schema"] = "genscope.performance/1";
  j["targets"] = {{"run", to_json(targets.run)}, {"steps", steps}};
  return j;
}

Attachment performance_attachment(const Run& run, const Targets& targets) {
  return Attachment{"performance", "performance", performance_report(run, targets)};
}

nlohmann::json score_change(const Validation& before, const Validation& after) {
  return {{"before_score", before.score},
          {"after_score", after.score},
          {"score_change", after.score - before.score},
          {"before_met", before.met},
          {"after_met", after.met},
          {"met_changed", before.met != after.met}};
}

}  // namespace genscope
