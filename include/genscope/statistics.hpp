// Robust statistics for noise-aware comparisons: median, MAD, Mann-Whitney U and a
// bootstrap confidence interval of the ratio of medians.
#pragma once

#include <cstdint>
#include <span>

namespace genscope {

/// Median; NaN for an empty sample.
double median(std::span<const double> values);
/// Median absolute deviation from the median (unscaled); NaN for an empty sample.
double median_absolute_deviation(std::span<const double> values);
/// Mean; NaN for an empty sample.
double mean(std::span<const double> values);
/// Coefficient of variation (sample stddev / mean); NaN for fewer than two values.
double coefficient_of_variation(std::span<const double> values);

/// Mann-Whitney U test result (two-sided, normal approximation with tie correction and
/// continuity correction; exact distribution when there are no ties and n1 * n2 <= 400).
struct MannWhitney {
  double u = 0;        ///< U statistic of the first sample.
  double p_value = 1;  ///< Two-sided p-value.
};

/// Tests whether `a` and `b` come from the same distribution.
MannWhitney mann_whitney_u(std::span<const double> a, std::span<const double> b);

/// A confidence interval.
struct Interval {
  double low = 0;
  double high = 0;
};

/// Percentile bootstrap CI of median(b) / median(a), deterministic for a given seed.
Interval bootstrap_median_ratio(std::span<const double> a, std::span<const double> b,
                                double confidence = 0.95, int resamples = 2000,
                                std::uint64_t seed = 0x9e3779b97f4a7c15ULL);

}  // namespace genscope
