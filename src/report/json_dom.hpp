// A parsed JSON document that can be freed when memory has run out (private to src/report).
//
// nlohmann::json frees an array or object through a heap-allocated stack of its children
// (json_value::destroy): when the parse of a large document runs out of memory, destroying
// the half-built tree needs memory too, and a destructor that throws std::bad_alloc ends the
// program (std::terminate). JsonDom builds the tree itself (SAX) and frees it depth first,
// emptying every container before it is destroyed, so freeing allocates nothing.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace genscope::detail {

/// Containers nested deeper than this are refused (freeing recurses once per level).
inline constexpr std::size_t kMaxJsonDepth = 1000;

/// Owns a parsed tree; destruction never allocates (and so never throws).
class JsonDom {
 public:
  JsonDom() = default;
  JsonDom(const JsonDom&) = delete;
  JsonDom& operator=(const JsonDom&) = delete;
  ~JsonDom() { release(value); }

  nlohmann::json value;

  /// Frees `v`'s children without allocating; `v` is left an empty container or a scalar.
  static void release(nlohmann::json& v) noexcept;
};

/// Parses `text` into `dom.value`. Returns "" or why the text is not a JSON document (a syntax
/// error, or nesting deeper than kMaxJsonDepth). Throws std::bad_alloc when memory runs out;
/// what was built so far stays in `dom` (freed without allocating).
std::string parse_json_dom(std::string_view text, JsonDom& dom);

}  // namespace genscope::detail
