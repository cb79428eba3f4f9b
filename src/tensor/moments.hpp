// Mergeable finite-value moments (Chan et al. parallel variance) and the SIMD entry points.
#pragma once

#include <cstdint>
#include <limits>

#include "genscope/dtype.hpp"

namespace genscope::detail {

/// Summary of a run of elements: counts of special values plus count/mean/M2/min/max of
/// the finite values. Partial summaries combine exactly with merge().
struct Moments {
  std::int64_t n = 0;  // finite values
  double mean = 0;
  double m2 = 0;  // sum of squared deviations from the mean
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  std::int64_t nan = 0;
  std::int64_t pos_inf = 0;
  std::int64_t neg_inf = 0;
  std::int64_t zeros = 0;

  /// Adds another summary (Chan's pairwise update of mean and M2).
  void merge(const Moments& o) noexcept;
};

/// Scalar (exact-classification) moments of elements [begin, begin + count) of a contiguous
/// array; used for tails and for blocks holding NaN/Inf.
Moments scalar_moments(const void* data, std::int64_t begin, std::int64_t count,
                       DType dtype) noexcept;

/// SIMD moments of `count` contiguous elements (Highway dynamic dispatch).
Moments summarize_contiguous(const void* data, std::int64_t count, DType dtype) noexcept;

}  // namespace genscope::detail
