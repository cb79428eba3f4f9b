// Questions the exports ask of a run's metrics and sampled series (private to src/report).
// NOTE for the merge with the console-report work: the same declarations (same names and
// signatures) live in that branch's src/report/memory_section.hpp; keep one copy.
#pragma once

#include <cstdint>
#include <string>

#include "genscope/run.hpp"

namespace genscope::detail {

/// The highest sample of one metric in a time window of the run's series.
struct SampledPeak {
  bool found = false;
  std::int64_t offset_ns = 0;  ///< From the run start.
  double value = 0;
};

/// Free or available memory: its peak means nothing (shown as before -> after).
bool is_headroom_metric(const std::string& name);
/// A figure that does not change during a run (total memory).
bool is_constant_metric(const std::string& name);

/// The highest sample of `metric` with from_ns <= offset <= to_ns (run-relative).
SampledPeak highest_sample(const Run& run, const std::string& metric, std::int64_t from_ns,
                           std::int64_t to_ns);

}  // namespace genscope::detail
