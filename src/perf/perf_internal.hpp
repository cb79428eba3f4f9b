// Private helpers shared by the perf sources (iteration figures, memory peaks, names).
#pragma once

#include <string_view>
#include <vector>

#include "genscope/run.hpp"
#include "genscope/validation.hpp"

namespace genscope::detail {

/// Iteration durations of a step as doubles.
std::vector<double> iteration_values(const StepRecord& step);
/// Iterations per second of a step's iterations; NaN without iterations.
double iterations_per_second(const StepRecord& step);
/// Highest known value of a metric in a step (peak, else before/after); NaN when absent.
double step_metric_max(const StepRecord& step, std::string_view metric);
/// Highest value of a metric over all steps of a run; NaN when absent.
double run_metric_max(const Run& run, std::string_view metric);
/// Highest GPU used memory ("gpu<i>.used_bytes", max over GPUs) of a step; NaN when absent.
double step_gpu_peak(const StepRecord& step);
/// True for the RAM figure of the monitored program: "process.rss_bytes" (in-process) or
/// "tree.rss_bytes" (a program watched by genscope run/watch: its whole process tree).
bool is_program_rss(std::string_view metric) noexcept;
/// Highest program RAM (process.rss_bytes, else tree.rss_bytes) of a step; NaN when absent.
double step_rss_max(const StepRecord& step);
/// The peak used for memory comparisons: GPU used memory, else process RSS.
double step_memory_peak(const StepRecord& step);
/// The architecture of a run: pipeline.architecture, else detected from model snapshots.
Architecture run_architecture(const Run& run);
/// "ok", "failed", "skipped", "running".
std::string_view status_name(StepStatus status) noexcept;

}  // namespace genscope::detail
