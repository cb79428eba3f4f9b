// Human units for reports: bytes (binary multiples labelled MB/GB as the seeds print them;
// KiB/MiB for the HTML report) and durations.
#include <cmath>
#include <cstdio>
#include <string>

#include "genscope/report.hpp"
#include "report/export_util.hpp"

namespace genscope {

namespace detail {

std::string format_scaled_bytes(double magnitude, const char* prefix,
                                std::span<const char* const> units) {
  double v = magnitude;
  std::size_t u = 0;
  while (v >= 1024.0 && u + 1 < units.size()) {
    v /= 1024.0;
    ++u;
  }
  char buf[48];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%s%.0f %s", prefix, v, units[0]);
  } else {
    std::snprintf(buf, sizeof buf, v < 10 ? "%s%.2f %s" : (v < 100 ? "%s%.1f %s" : "%s%.0f %s"),
                  prefix, v, units[u]);
  }
  return buf;
}

}  // namespace detail

std::string format_bytes(double bytes, bool sign) {
  if (std::isnan(bytes)) return "n/a";
  const char* prefix = (sign && bytes > 0) ? "+" : (bytes < 0 ? "-" : "");
  // Binary multiples, labelled as the seeds (and PyTorch users) label them.
  static constexpr const char* kUnits[] = {"B", "KB", "MB", "GB", "TB"};
  return detail::format_scaled_bytes(std::fabs(bytes), prefix, kUnits);
}

std::string format_duration(double ns, bool plain) {
  if (std::isnan(ns)) return "n/a";
  char buf[48];
  const double a = std::fabs(ns);
  if (a < 1e3) {
    std::snprintf(buf, sizeof buf, "%.0f ns", ns);
  } else if (a < 1e6) {
    std::snprintf(buf, sizeof buf, plain ? "%.1f us" : "%.1f µs", ns / 1e3);
  } else if (a < 1e9) {
    std::snprintf(buf, sizeof buf, "%.2f ms", ns / 1e6);
  } else if (a < 60e9) {
    std::snprintf(buf, sizeof buf, "%.2f s", ns / 1e9);
  } else {
    const double minutes = std::floor(a / 60e9);
    std::snprintf(buf, sizeof buf, "%s%.0f min %.1f s", ns < 0 ? "-" : "", minutes,
                  (a - minutes * 60e9) / 1e9);
  }
  return buf;
}

std::string format_cadence(const TimeSeries& series, bool plain) {
  std::string out = "every " + format_duration(static_cast<double>(series.interval_ns), plain);
  if (series.max_interval_ns > series.interval_ns) {
    out += " near events, up to " +
           format_duration(static_cast<double>(series.max_interval_ns), plain) + " between";
  }
  return out;
}

}  // namespace genscope
