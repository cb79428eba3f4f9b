// The run document as the text every writer puts in a file (private to src/report).
#pragma once

#include <string>

#include "genscope/run.hpp"

namespace genscope::detail {

/// to_json(run) indented by one space, newline-terminated. Invalid UTF-8 in strings (a step
/// name, a prompt) becomes U+FFFD instead of failing, so a finished run can always be saved.
std::string run_document_text(const Run& run);

}  // namespace genscope::detail
