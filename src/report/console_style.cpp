// Metric labels, value and number formatting and status markers for the console report.
#include "report/console_style.hpp"

#include <cmath>
#include <cstdio>

#include "genscope/report.hpp"

namespace genscope::detail {

std::string ConsoleStyle::status(StepStatus s) const {
  switch (s) {
    case StepStatus::kOk: return mark("✅", "[ok]");
    case StepStatus::kFailed: return mark("❌", "[FAILED]");
    case StepStatus::kSkipped: return mark("⏭️", "[skipped]");
    case StepStatus::kRunning: return mark("⏳", "[running]");
  }
  return "?";
}

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string metric_label(const std::string& name) {
  static const std::pair<const char*, const char*> kFixed[] = {
      {"process.rss_bytes", "RAM (process RSS)"},
      {"system.used_bytes", "RAM (system used)"},
      {"system.available_bytes", "RAM (system available)"},
      {"system.used_percent", "RAM usage"},
      {"system.total_bytes", "RAM (system total)"},
  };
  for (const auto& [key, label] : kFixed) {
    if (name == key) return label;
  }
  static const std::pair<const char*, const char*> kGpu[] = {
      {".process_used_bytes", "memory used by this process"},
      {".used_bytes", "memory used"},
      {".free_bytes", "memory free"},
      {".reserved_bytes", "memory reserved"},
      {".total_bytes", "memory total"},
      {".memory_utilization_percent", "memory-controller utilisation"},
      {".utilization_percent", "utilisation"},
      {".temperature_celsius", "temperature"},
      {".power_watts", "power"},
      {".sm_clock_hertz", "SM clock"},
      {".memory_clock_hertz", "memory clock"},
  };
  if (name.rfind("gpu", 0) == 0) {
    const auto dot = name.find('.');
    for (const auto& [suffix, label] : kGpu) {
      if (ends_with(name, suffix)) return "GPU " + name.substr(3, dot - 3) + " " + label;
    }
  }
  if (name.rfind("alloc.", 0) == 0) {
    const auto last = name.rfind('.');
    const std::string device = name.substr(6, last - 6);
    if (ends_with(name, ".allocated_bytes")) return "GPU allocated (" + device + ")";
    if (ends_with(name, ".reserved_bytes")) return "GPU reserved (" + device + ")";
  }
  return name;
}

std::string format_value(double value, Unit unit, bool sign, bool plain) {
  if (std::isnan(value)) return "n/a";
  char buf[48];
  const char* plus = (sign && value > 0) ? "+" : "";
  switch (unit) {
    case Unit::kBytes: return format_bytes(value, sign);
    case Unit::kPercent: std::snprintf(buf, sizeof buf, "%s%.1f%%", plus, value); break;
    case Unit::kWatts: std::snprintf(buf, sizeof buf, "%s%.1f W", plus, value); break;
    case Unit::kCelsius:
      std::snprintf(buf, sizeof buf, plain ? "%s%.0f C" : "%s%.0f °C", plus, value);
      break;
    case Unit::kHertz: std::snprintf(buf, sizeof buf, "%s%.0f MHz", plus, value / 1e6); break;
    case Unit::kCount: return std::string(plus) + format_number(value);
  }
  return buf;
}

std::string format_number(double v) {
  if (std::isnan(v)) return "n/a";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[400];  // the largest double has 309 integer digits
  const double a = std::fabs(v);
  if (v == std::trunc(v) && a < 1e18) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  // Four significant digits in fixed notation (two below 1e-4, where more digits only make
  // the zeros harder to count); at most 12 decimals, so |v| >= 1e-12 shows.
  int decimals = (a < 1e-4 ? 1 : 3) - static_cast<int>(std::floor(std::log10(a)));
  decimals = decimals < 0 ? 0 : (decimals > 12 ? 12 : decimals);
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  if (s == "0" || s == "-0") return v < 0 ? "> -0.000000000001" : "< 0.000000000001";
  return s;
}

std::string format_count(double v) {
  if (std::isnan(v)) return "n/a";
  if (v != std::trunc(v) || std::fabs(v) >= 1e18) return format_number(v);
  const long long n = static_cast<long long>(v);
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (n < 0 ? "-" : "") + out;
}

std::string format_short_count(double v) {
  if (std::isnan(v)) return "n/a";
  char buf[48];
  const double a = std::fabs(v);
  if (a >= 1e9) {
    std::snprintf(buf, sizeof buf, "%.2fG", v / 1e9);
  } else if (a >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
  } else if (a >= 1e4) {
    std::snprintf(buf, sizeof buf, "%.1fk", v / 1e3);
  } else if (a >= 100 || v == std::trunc(v)) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, a >= 1 ? "%.1f" : "%.3f", v);
  }
  return buf;
}

}  // namespace genscope::detail
