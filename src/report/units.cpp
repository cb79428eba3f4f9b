// Human units for reports: bytes (binary multiples with their IEC names, KiB/MiB/GiB, in every
// report) and durations.
#include <cmath>
#include <cstdio>
#include <iterator>
#include <string>

#include "genscope/report.hpp"
#include "report/export_util.hpp"

namespace genscope {

std::string format_bytes(double bytes, bool sign) {
  if (!std::isfinite(bytes)) return "n/a";
  const char* prefix = (sign && bytes > 0) ? "+" : (bytes < 0 ? "-" : "");
  // Binary multiples under their IEC names: the seeds printed bytes / 1024**2 as "MB", which
  // reads as 10^6 to anyone comparing with `ls -l --si`, Grafana or a vendor's data sheet.
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = std::fabs(bytes);
  std::size_t u = 0;
  // 1023.6 KiB would print as "1024 KiB": values that round to 1024 go up a unit too.
  while (v >= 1023.5 && u + 1 < std::size(kUnits)) {
    v /= 1024.0;
    ++u;
  }
  char buf[48];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%s%.0f %s", prefix, v, kUnits[0]);
  } else {
    std::snprintf(buf, sizeof buf, v < 10 ? "%s%.2f %s" : (v < 100 ? "%s%.1f %s" : "%s%.0f %s"),
                  prefix, v, kUnits[u]);
  }
  return buf;
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
