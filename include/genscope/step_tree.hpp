// The step tree's invariants: one builder enforces them on every finished run, whatever
// source gave the steps (the C++ API, the event channel, log recognisers, forwarded steps),
// and one checker verifies them (docs/run-schema.md, "The step tree").
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "genscope/run.hpp"
#include "genscope/step_kind.hpp"

namespace genscope {

/// `StepRecord::closed_by` values: the step's end was seen ("explicit"), was inferred from
/// other evidence ("inferred:<reason>", e.g. "inferred:next step"), or is the run's end
/// ("run_end": the step was still open when its run finished).
inline constexpr const char* kClosedExplicit = "explicit";
inline constexpr const char* kClosedRunEnd = "run_end";
inline constexpr const char* kClosedInferredPrefix = "inferred:";

/// Makes a finished run's steps a true tree, in place:
/// - every step lies within [0, duration_ns] of its run (a step that outlived the run is cut
///   at its end and closed_by "run_end"; label `tree.clamped` says what was cut);
/// - a parent id that names no earlier step becomes -1 (label `tree.parent_dropped`);
/// - a child lies within its parent: a parent whose bounds were inferred (closed_by not
///   "explicit", or `inferred`) grows to hold it (label `tree.grown`); otherwise the child
///   moves to the nearest ancestor that holds it, or to the top level (label
///   `tree.reparented_from`);
/// - a step with an empty closed_by gets "explicit".
/// Applied by ActiveRun::finish() to every run. Idempotent.
void normalize_step_tree(Run& run);

/// The violated invariants of a finished run's step tree, one sentence each (empty when the
/// tree is sound): ids, parents, children within parents, steps within the run, no step left
/// running, closed_by values, and the time summary adding up to the run's duration.
std::vector<std::string> check_step_tree(const Run& run);

/// Where the run's time went, each moment counted once: a moment belongs to the innermost
/// step covering it (the latest started one where threads overlap), or is unattributed.
struct StepTimeSummary {
  std::int64_t run_ns = 0;           ///< The run's duration.
  std::int64_t top_level_ns = 0;     ///< Union of the top-level steps' intervals.
  std::int64_t unattributed_ns = 0;  ///< run_ns - top_level_ns: no step covers it.
  std::int64_t inferred_ns = 0;      ///< Attributed to a step marked inferred.
  std::map<StepKind, std::int64_t> by_kind_ns;  ///< Innermost step's kind per moment.
  /// The uncovered intervals [start, end) from the run start, in order.
  std::vector<std::pair<std::int64_t, std::int64_t>> gaps;
};

/// Computes the summary (by_kind_ns plus unattributed_ns equals run_ns).
StepTimeSummary summarize_step_time(const Run& run);

}  // namespace genscope
