// Reading attachment JSON for the console report: tolerant accessors (a missing or mistyped
// field reads as "absent", never throws: attachments come from any integration), human units
// chosen by key suffix, and the generic tree of an attachment's data.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace genscope::detail {

/// The member `key` of an object, or nullptr (also when `j` is not an object).
const nlohmann::json* field(const nlohmann::json& j, const char* key);
/// A numeric member as double; NaN when missing, null or not a number.
double field_number(const nlohmann::json& j, const char* key);
/// A string member; empty when missing or not a string.
std::string field_text(const nlohmann::json& j, const char* key);
/// A boolean member; `fallback` when missing or not a boolean.
bool field_bool(const nlohmann::json& j, const char* key, bool fallback = false);
/// The size of an array member, or of an object member; 0 otherwise.
std::size_t field_size(const nlohmann::json& j, const char* key);

/// A scalar in human units chosen by its key: *_ns / *_ms / *_seconds durations, *_bytes /
/// *_mb / *_gb sizes, *_percent, *_per_second rates, *_hertz, *_watts, *_celsius,
/// "timestamp" (Unix seconds) as UTC; booleans as yes/no; numbers never in exponent notation;
/// arrays of scalars inline ("[1, 4, 64, 64]").
std::string format_field(const std::string& key, const nlohmann::json& value, bool plain);

/// The items of an array, one per line, cut after `limit` items ("… and 12 more").
void render_list(std::string& out, const nlohmann::json& array, const std::string& indent,
                 std::size_t limit, bool plain);

/// Renders `data` as "key: value" lines. `full`: every entry at every depth (--verbose);
/// otherwise two levels deep, large objects and arrays summarised by their size.
void render_json_tree(std::string& out, const nlohmann::json& data, const std::string& indent,
                      bool full, bool plain);

}  // namespace genscope::detail
