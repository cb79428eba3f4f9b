// Small helpers shared by the exports (HTML, Chrome trace, CSV): numbers in their shortest
// round-trip form, JSON strings, microsecond timestamps from nanoseconds, HTML escaping, and
// overflow-free time arithmetic (a malformed run document can hold any int64).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "genscope/run.hpp"

namespace genscope::detail {

/// Appends the shortest decimal that reads back as `value` (std::to_chars), whole numbers
/// below 2^53 as integers; NaN and infinities append `non_finite` ("null" in JSON, "" in CSV).
void append_number(std::string& out, double value, std::string_view non_finite = "null");
/// Appends an integer.
void append_int(std::string& out, std::int64_t value);
/// Nanoseconds to whole microseconds, rounded half up (floor((ns + 500) / 1000)): monotonic,
/// so intervals that nest or touch in nanoseconds still nest or touch in microseconds.
std::int64_t round_us(std::int64_t ns) noexcept;
/// Appends `text` as a JSON string literal (quotes included; invalid UTF-8 replaced by U+FFFD).
void append_json_string(std::string& out, std::string_view text);
/// Appends `text` escaped for HTML text and attribute values (& < > " ').
void append_html(std::string& out, std::string_view text);
/// a + b, saturated at the int64 limits instead of overflowing.
std::int64_t add_saturated(std::int64_t a, std::int64_t b) noexcept;

/// The depth of each step of `run` (0: top level, 1: inside a top-level step, ...), by its
/// parent chain; bounded at 64 levels, so a malformed cycle cannot loop.
std::vector<int> step_depths(const Run& run);

/// Whether a step's own begin or end was inferred from evidence (a log line, a progress bar)
/// rather than observed: the one place every export asks it. True for a step read from a gap
/// (`inferred`) and for one whose end was inferred or forced by the run's end (`closed_by`
/// "inferred:<reason>" or "run_end"; docs/run-schema.md "The step tree").
bool step_inferred(const StepRecord& step) noexcept;
/// Whether some of a step's iteration durations were inferred (spread over a progress
/// redraw) rather than timed one by one.
inline bool iterations_inferred(const StepRecord& step) noexcept {
  return step.iterations_inferred;
}

}  // namespace genscope::detail
