// UTC wall-clock formatting.
#include "core/utc_time.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>

namespace genscope::detail {

std::string format_utc_iso8601(std::int64_t unix_ns) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ns / 1'000'000'000);
  const int millis = static_cast<int>((unix_ns / 1'000'000) % 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
  return buf;
}

std::int64_t unix_now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string utc_now_iso8601() { return format_utc_iso8601(unix_now_ns()); }

}  // namespace genscope::detail
