// Small helpers shared by the exports (HTML, Chrome trace, CSV): numbers in their shortest
// round-trip form, JSON strings, microsecond timestamps from nanoseconds, HTML escaping, and
// overflow-free time arithmetic (a malformed run document can hold any int64).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace genscope::detail {

/// Appends the shortest decimal that reads back as `value` (std::to_chars), whole numbers
/// below 2^53 as integers; NaN and infinities append `non_finite` ("null" in JSON, "" in CSV).
void append_number(std::string& out, double value, std::string_view non_finite = "null");
/// Appends an integer.
void append_int(std::string& out, std::int64_t value);
/// Appends nanoseconds as exact microseconds: 12490533 -> "12490.533", 5000 -> "5".
void append_us(std::string& out, std::int64_t ns);
/// Appends `text` as a JSON string literal (quotes included; invalid UTF-8 replaced by U+FFFD).
void append_json_string(std::string& out, std::string_view text);
/// Appends `text` escaped for HTML text and attribute values (& < > " ').
void append_html(std::string& out, std::string_view text);
/// a + b, saturated at the int64 limits instead of overflowing.
std::int64_t add_saturated(std::int64_t a, std::int64_t b) noexcept;

}  // namespace genscope::detail
