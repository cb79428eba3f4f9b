// tqdm frame parser (format of tqdm/tqdm tqdm/std.py `tqdm.format_meter`, commit 000ba6fa).
#include "watch/tqdm_frame.hpp"

#include <cmath>

#include "watch/text_scan.hpp"

namespace genscope::watch {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// n_fmt / total_fmt: str(n), or format_sizeof(n) = "{:1.2f}|{:2.1f}|{:3.0f}" + SI prefix
// (tqdm/std.py `format_sizeof`).
std::optional<double> parse_scaled(std::string_view s, bool* integral) {
  s = trim(s);
  if (s.empty()) return std::nullopt;
  double scale = 1;
  switch (s.back()) {
    case 'k': scale = 1e3; break;
    case 'M': scale = 1e6; break;
    case 'G': scale = 1e9; break;
    case 'T': scale = 1e12; break;
    case 'P': scale = 1e15; break;
    case 'E': scale = 1e18; break;
    case 'Z': scale = 1e21; break;
    case 'Y': scale = 1e24; break;
    default: break;
  }
  if (scale != 1) s.remove_suffix(1);
  for (char c : s) {
    if (!is_digit(c) && c != '.') return std::nullopt;
  }
  const auto v = parse_number(s);
  if (!v) return std::nullopt;
  if (scale != 1 || s.find('.') != std::string_view::npos) *integral = false;
  const double value = *v * scale;
  // Counts are used as 64-bit integers: beyond 9e18 (a "999Y" total) it is no bar we count.
  if (!std::isfinite(value) || value > 9e18) return std::nullopt;
  return value;
}

// "[{elapsed}<{remaining}, {rate_fmt}{postfix}]" or "[{elapsed}, {rate_fmt}{postfix}]" at the
// start of `s`. Fills elapsed and unit; returns the text after ']' or nullopt.
std::optional<std::string_view> parse_stats(std::string_view s, bool with_remaining,
                                             TqdmFrame& f) {
  if (s.empty() || s.front() != '[') return std::nullopt;
  const std::size_t close = s.find(']');
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view in = s.substr(1, close - 1);
  const std::size_t comma = in.find(", ");
  if (comma == std::string_view::npos) return std::nullopt;
  std::string_view times = in.substr(0, comma);
  std::string_view rate = in.substr(comma + 2);
  if (with_remaining) {
    const std::size_t lt = times.find('<');
    if (lt == std::string_view::npos) return std::nullopt;
    times = times.substr(0, lt);
  }
  f.elapsed_seconds = parse_clock_seconds(times);
  if (!f.elapsed_seconds) return std::nullopt;
  if (const std::size_t post = rate.find(", "); post != std::string_view::npos) {
    rate = rate.substr(0, post);
  }
  rate = trim(rate);
  // "{rate:5.2f}{unit}/s", "{inv_rate:5.2f}s/{unit}", "?{unit}/s", "?s/{unit}"
  std::size_t i = 0;
  while (i < rate.size() && (is_digit(rate[i]) || rate[i] == '.' || rate[i] == '?')) ++i;
  if (i == 0) return std::nullopt;
  const std::string_view tail = rate.substr(i);
  if (tail.size() > 2 && tail.substr(0, 2) == "s/") {
    f.unit = tail.substr(2);
  } else if (tail.size() > 2 && tail.substr(tail.size() - 2) == "/s") {
    f.unit = tail.substr(0, tail.size() - 2);
  } else {
    return std::nullopt;
  }
  return s.substr(close + 1);
}

std::string_view desc_of(std::string_view before) {
  std::string_view d = trim(before);
  if (!d.empty() && d.back() == ':') d.remove_suffix(1);
  return trim(d);
}

std::optional<TqdmFrame> parse_with_total(std::string_view line, std::size_t pct_bar) {
  TqdmFrame f;
  // "{percentage:3.0f}%|": digits (right-aligned in 3 columns) just before "%|".
  std::size_t i = pct_bar;
  while (i > 0 && is_digit(line[i - 1])) --i;
  if (i == pct_bar) return std::nullopt;
  f.desc = desc_of(line.substr(0, i));
  // "{bar}| {n_fmt}/{total_fmt} "
  const std::size_t bar_end = line.find('|', pct_bar + 2);
  if (bar_end == std::string_view::npos || bar_end + 1 >= line.size() || line[bar_end + 1] != ' ') {
    return std::nullopt;
  }
  std::string_view r = line.substr(bar_end + 2);
  const std::size_t slash = r.find('/');
  const std::size_t space = r.find(' ');
  if (slash == std::string_view::npos || space == std::string_view::npos || slash > space) {
    return std::nullopt;
  }
  const auto n = parse_scaled(r.substr(0, slash), &f.integral);
  const auto total = parse_scaled(r.substr(slash + 1, space - slash - 1), &f.integral);
  if (!n || !total) return std::nullopt;
  f.n = *n;
  f.total = *total;
  const auto rest = parse_stats(r.substr(space + 1), true, f);
  if (!rest) return std::nullopt;
  f.rest = *rest;
  return f;
}

std::optional<TqdmFrame> parse_without_total(std::string_view line) {
  // "{desc}: {n_fmt}{unit} [{elapsed}, {rate_fmt}{postfix}]"
  const std::size_t open = line.find(" [");
  if (open == std::string_view::npos || open == 0) return std::nullopt;
  TqdmFrame f;
  const auto rest = parse_stats(line.substr(open + 1), false, f);
  if (!rest) return std::nullopt;
  std::size_t start = open;
  while (start > 0 && line[start - 1] != ' ') --start;
  const std::string_view token = line.substr(start, open - start);  // "12it", "3.44GB"
  if (token.size() <= f.unit.size() || token.substr(token.size() - f.unit.size()) != f.unit) {
    return std::nullopt;
  }
  const auto n = parse_scaled(token.substr(0, token.size() - f.unit.size()), &f.integral);
  if (!n) return std::nullopt;
  f.n = *n;
  f.desc = desc_of(line.substr(0, start));
  f.rest = *rest;
  return f;
}

}  // namespace

std::optional<TqdmFrame> parse_tqdm_frame(std::string_view line) noexcept {
  try {
    const std::size_t pct_bar = line.find("%|");
    if (pct_bar != std::string_view::npos) return parse_with_total(line, pct_bar);
    return parse_without_total(line);
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace genscope::watch
