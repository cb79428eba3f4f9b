// Writing event lines (the in-process sink's side): what a Monitor forwards to the
// `genscope run` / `genscope watch` that started its process. Each function returns one line
// without its '\n'; text that is not valid UTF-8 is written with U+FFFD in its place.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "genscope/run.hpp"

namespace genscope::event_line {

/// The "ref" of a forwarded step: "<pid>.<monitor>:<run>:<step id>", unique across the
/// monitors of the processes writing into one channel.
std::string forwarded_ref(int pid, int monitor, std::uint64_t run, int step_id);

/// A forwarded step's begin line.
std::string encode_begin(const StepRecord& step, std::string_view ref);
/// A forwarded finished step.
std::string encode_step(const StepRecord& step, std::string_view ref,
                        std::int64_t start_steady_ns);
/// A forwarded run's begin line (its labels plus kForwardedRunIdLabel).
std::string encode_run_begin(const Run& run);
/// A forwarded run's end line: its run-level attachments (except "usage"), notes, errors.
std::string encode_run_end(const Run& run);

}  // namespace genscope::event_line
