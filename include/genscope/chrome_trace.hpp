// Chrome Trace Event JSON export of runs: opens in Perfetto UI (ui.perfetto.dev) and in
// chrome://tracing. Rendered from Run values, never from the live monitor. Layout of the
// document and its rules: docs/report.md ("Perfetto / Chrome trace").
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "genscope/run.hpp"

namespace genscope {

/// Options of the Chrome trace export.
struct ChromeTraceOptions {
  /// Spans per counter track: a metric with more samples keeps the rows of the minimum and
  /// the maximum of each span of time (spikes stay visible), so a long run stays small.
  std::size_t counter_spans = 5000;
  /// Iteration slices per step: a step with more iterations gets this many slices, each
  /// covering consecutive iterations (count, mean, min and max in its args).
  std::size_t max_iteration_slices = 10000;
  /// Where each run's time zero lies on the trace's clock, in ns (the merged ranks of a
  /// distributed generation, merge.hpp); a run without an entry starts at 0.
  std::vector<std::int64_t> run_offsets_ns;
};

/// Renders runs as one trace: one process per run (in the given order), steps as complete
/// ("X") events on their thread's track, nested as they nest (overlapping steps on async
/// tracks), attempts and iterations as slices inside their step, each sampled metric as a
/// counter track in its unit, monitoring errors as instants, run metadata in "metadata".
/// Timestamps are microseconds from each run's start (plus its entry of run_offsets_ns).
/// A run of a distributed job is named for its rank; the trace of one rank's run opens with
/// "distributedInfo" (rank, world_size, local_rank, group), as Holistic Trace Analysis reads.
std::string render_chrome_trace(std::span<const Run> runs, const ChromeTraceOptions& options = {});
/// Same for one run.
std::string render_chrome_trace(const Run& run, const ChromeTraceOptions& options = {});

}  // namespace genscope
