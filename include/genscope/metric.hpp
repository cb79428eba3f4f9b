// Named probe figures: what a probe measures, in which unit.
#pragma once

#include <string>
#include <string_view>

namespace genscope {

/// The unit of a probe figure. Values are stored in base units (bytes, percent, ...).
enum class Unit { kBytes, kPercent, kWatts, kCelsius, kHertz, kCount };

/// Stable unit name ("bytes", "percent", "watts", "celsius", "hertz", "count").
std::string_view to_string(Unit unit) noexcept;
/// Parses a unit name; kCount when unknown.
Unit parse_unit(std::string_view name) noexcept;

/// Describes one figure a probe reports, e.g. {"process.rss_bytes", kBytes}.
struct MetricInfo {
  std::string name;  ///< Dotted name, "<probe>.<figure>", e.g. "gpu0.used_bytes".
  Unit unit = Unit::kBytes;
  /// The probe can report an exact peak of this figure since its last reset
  /// (VmHWM for RSS, the allocator's peak counters).
  bool exact_peak = false;
};

}  // namespace genscope
