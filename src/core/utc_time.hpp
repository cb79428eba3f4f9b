// UTC wall-clock formatting shared by the run document and the text log.
#pragma once

#include <cstdint>
#include <string>

namespace genscope::detail {

/// Formats a Unix time in nanoseconds as ISO 8601 UTC with milliseconds
/// ("2026-11-21T12:00:00.123Z").
std::string format_utc_iso8601(std::int64_t unix_ns);
/// Current UTC time as ISO 8601 with milliseconds.
std::string utc_now_iso8601();
/// Current Unix time in nanoseconds (system clock).
std::int64_t unix_now_ns() noexcept;

}  // namespace genscope::detail
