// Helpers shared by the exports (see export_util.hpp).
#include "report/export_util.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>

namespace genscope::detail {

void append_number(std::string& out, double value, std::string_view non_finite) {
  if (!std::isfinite(value)) {
    out += non_finite;
    return;
  }
  // Whole numbers (bytes, counts, nanoseconds) as integers: "100000000", not "1e+08".
  if (value == std::trunc(value) && std::fabs(value) < 9007199254740992.0) {  // 2^53
    append_int(out, static_cast<std::int64_t>(value));
    return;
  }
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, value);
  out.append(buf, r.ptr);
}

void append_int(std::string& out, std::int64_t value) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, value);
  out.append(buf, r.ptr);
}

std::vector<int> step_depths(const Run& run) {
  std::unordered_map<int, std::size_t> index;
  for (std::size_t i = 0; i < run.steps.size(); ++i) index.emplace(run.steps[i].id, i);
  std::vector<int> depth(run.steps.size(), 0);
  for (std::size_t i = 0; i < run.steps.size(); ++i) {
    int parent = run.steps[i].parent_id;
    for (std::size_t guard = 0; parent >= 0 && guard < 64; ++guard) {
      const auto it = index.find(parent);
      if (it == index.end()) break;
      ++depth[i];
      parent = run.steps[it->second].parent_id;
    }
  }
  return depth;
}

bool step_inferred(const StepRecord& step) noexcept {
  return step.inferred || step.closed_by == "run_end" || step.closed_by.starts_with("inferred");
}

std::int64_t round_us(std::int64_t ns) noexcept {
  const std::int64_t shifted = add_saturated(ns, 500);
  const std::int64_t q = shifted / 1000;
  return (shifted % 1000 < 0) ? q - 1 : q;  // floor division for negative offsets
}

void append_json_string(std::string& out, std::string_view text) {
  out += nlohmann::json(std::string(text))
             .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void append_html(std::string& out, std::string_view text) {
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
}

std::int64_t add_saturated(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t r;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return b > 0 ? std::numeric_limits<std::int64_t>::max()
               : std::numeric_limits<std::int64_t>::min();
}

}  // namespace genscope::detail
