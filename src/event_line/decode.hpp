// Reading event lines (the watch engine's side): strict checks, named errors.
#pragma once

#include <string_view>

#include "event_line/event.hpp"

namespace genscope::event_line {

/// Parses one line (without its '\n'; a trailing '\r' is dropped). Throws
/// genscope::Error("InvalidEvent") naming the field, or the limit for a line longer than
/// kMaxLineBytes.
Event parse_event(std::string_view line);

}  // namespace genscope::event_line
