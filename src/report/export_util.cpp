// Helpers shared by the exports (see export_util.hpp).
#include "report/export_util.hpp"

#include <charconv>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

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

void append_us(std::string& out, std::int64_t ns) {
  // Integer arithmetic: the decimal is exact, so readers that round microseconds * 1000 to
  // the nearest nanosecond (Perfetto) get the original value back.
  std::uint64_t magnitude =
      ns < 0 ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  if (ns < 0) out += '-';
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, magnitude / 1000);
  out.append(buf, r.ptr);
  unsigned fraction = static_cast<unsigned>(magnitude % 1000);
  if (fraction == 0) return;
  char digits[4] = {'.', static_cast<char>('0' + fraction / 100),
                    static_cast<char>('0' + fraction / 10 % 10),
                    static_cast<char>('0' + fraction % 10)};
  std::size_t n = 4;
  while (digits[n - 1] == '0') --n;
  out.append(digits, n);
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
