// The safetensors JSON header, read by a strict event parser into a raw, not yet validated form.
//
// A general JSON DOM keeps the last of duplicate keys silently, so the header is read by a
// small strict event parser: duplicates are seen, nothing is built that is not needed,
// and type problems are recorded (not thrown) so that validation can report them in a fixed
// order after the whole header is known to be valid JSON.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace genscope::detail {

/// One tensor entry as written in the header, with what was wrong about its fields.
struct RawSafetensorsEntry {
  std::string name;
  bool is_object = true;      ///< The entry's value is a JSON object.
  std::string unknown_field;  ///< First field other than dtype/shape/data_offsets.
  bool has_dtype = false;
  bool dtype_is_string = true;
  std::string dtype;
  bool has_shape = false;
  bool shape_ok = true;  ///< An array of integers in [0, INT64_MAX].
  std::vector<std::int64_t> shape;
  bool has_offsets = false;
  bool offsets_ok = true;  ///< An array of unsigned integers (count checked later).
  std::vector<std::uint64_t> offsets;
};

/// The whole header in raw form.
struct RawSafetensorsHeader {
  bool json_ok = true;
  std::size_t json_error_offset = 0;
  std::string json_error;
  bool top_is_object = true;
  /// First duplicate key (dotted path) among __metadata__, entry fields and metadata keys;
  /// duplicate tensor names are left to the reader. Empty when none.
  std::string duplicate_key;
  std::vector<RawSafetensorsEntry> entries;  ///< In header order.
  bool has_metadata = false;
  bool metadata_ok = true;  ///< An object whose values are all strings.
  std::string metadata_problem;
  std::map<std::string, std::string> metadata;
};

/// Parses `json` (already checked to be valid UTF-8). Never throws for bad input.
RawSafetensorsHeader parse_safetensors_header(std::string_view json);

}  // namespace genscope::detail
