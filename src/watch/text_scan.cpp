// Number, size and clock parsers for recognised lines.
#include "watch/text_scan.hpp"

#include <charconv>
#include <cmath>

namespace genscope::watch {

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<std::string_view> after(std::string_view s, std::string_view needle) noexcept {
  const std::size_t at = s.find(needle);
  if (at == std::string_view::npos) return std::nullopt;
  return s.substr(at + needle.size());
}

std::optional<double> parse_number(std::string_view s) noexcept {
  // The whole field: fixed or scientific ("9.5367431640625e+25", ComfyUI's "usable" on CPU).
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  double v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v, std::chars_format::general);
  if (ec != std::errc() || ptr == s.data() || ptr != s.data() + s.size() || !std::isfinite(v)) {
    return std::nullopt;
  }
  return v;
}

std::optional<double> leading_number(std::string_view s, std::string_view* rest) noexcept {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  double v = 0;
  const char* first = s.data();
  const char* last = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(first, last, v, std::chars_format::fixed);
  if (ec != std::errc() || ptr == first || !std::isfinite(v)) return std::nullopt;
  if (rest != nullptr) *rest = std::string_view(ptr, static_cast<std::size_t>(last - ptr));
  return v;
}

std::optional<std::int64_t> parse_count(std::string_view s) noexcept {
  std::int64_t v = 0;
  if (s.empty()) return std::nullopt;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

std::optional<double> parse_size_bytes(std::string_view s) noexcept {
  std::string_view rest;
  const auto v = leading_number(s, &rest);
  if (!v) return std::nullopt;
  rest = trim(rest);
  // Only the unit itself: stop at the first character that cannot belong to one.
  std::size_t n = 0;
  while (n < rest.size() && ((rest[n] >= 'a' && rest[n] <= 'z') || (rest[n] >= 'A' && rest[n] <= 'Z'))) {
    ++n;
  }
  const std::string_view unit = rest.substr(0, n);
  double scale = 0;
  if (unit == "B" || unit == "bytes" || unit == "byte") {
    scale = 1;
  } else if (unit == "KiB" || unit == "KB" || unit == "kB") {
    scale = 1024.0;
  } else if (unit == "MiB" || unit == "MB") {
    scale = 1024.0 * 1024.0;
  } else if (unit == "GiB" || unit == "GB") {
    scale = 1024.0 * 1024.0 * 1024.0;
  } else if (unit == "TiB" || unit == "TB") {
    scale = 1024.0 * 1024.0 * 1024.0 * 1024.0;
  } else {
    return std::nullopt;
  }
  return *v * scale;
}

std::optional<double> parse_clock_seconds(std::string_view s) noexcept {
  s = trim(s);
  if (s.empty()) return std::nullopt;
  double total = 0;
  int fields = 0;
  while (true) {
    const std::size_t colon = s.find(':');
    const std::string_view field = s.substr(0, colon);
    const auto v = parse_count(field);
    if (!v) return std::nullopt;
    total = total * 60 + static_cast<double>(*v);
    if (++fields > 3) return std::nullopt;
    if (colon == std::string_view::npos) break;
    s.remove_prefix(colon + 1);
  }
  return total;
}

std::int64_t seconds_to_ns(double seconds) noexcept {
  if (!std::isfinite(seconds) || seconds <= 0) return 0;
  if (seconds > 9.2e9) return INT64_MAX;
  return static_cast<std::int64_t>(std::llround(seconds * 1e9));
}

}  // namespace genscope::watch
