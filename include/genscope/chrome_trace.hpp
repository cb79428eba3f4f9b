// Chrome Trace Event JSON export of runs: opens in Perfetto UI (ui.perfetto.dev) and in
// chrome://tracing. Rendered from Run values, never from the live monitor. Layout of the
// document and its rules: docs/report.md ("Perfetto / Chrome trace").
#pragma once

#include <cstddef>
#include <span>
#include <string>

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
};

/// Renders runs as one trace: one process per run (in the given order), steps as complete
/// ("X") events on their thread's track, nested as they nest (overlapping steps on async
/// tracks), attempts and iterations as slices inside their step, each sampled metric as a
/// counter track in its unit, monitoring errors as instants, run metadata in "metadata".
/// Timestamps are microseconds from each run's start.
std::string render_chrome_trace(std::span<const Run> runs, const ChromeTraceOptions& options = {});
/// Same for one run.
std::string render_chrome_trace(const Run& run, const ChromeTraceOptions& options = {});

}  // namespace genscope
