// Mergeable accumulator of an element-wise comparison, and the SIMD entry point.
#pragma once

#include <cstdint>

#include "genscope/dtype.hpp"

namespace genscope::detail {

/// Sums and maxima of a comparison over a run of positions.
struct CompareAcc {
  std::int64_t compared = 0;      // positions where both values are finite
  std::int64_t mismatch = 0;      // positions that are not close (numpy isclose)
  std::int64_t nan_mismatch = 0;  // NaN in exactly one operand
  double sum_abs = 0;  // sum |a - b|
  double sum_sq = 0;   // sum (a - b)^2
  double sum_ab = 0;
  double sum_aa = 0;
  double sum_bb = 0;
  double max_abs = -1;  // max |a - b|; -1 before any position
  double max_rel = 0;
  double peak_a = 0;  // max |a|
  std::int64_t worst = -1;  // flat index of max_abs (first occurrence)
  double worst_a = 0;
  double worst_b = 0;

  /// Adds the accumulator of a later run of positions.
  void merge(const CompareAcc& o) noexcept;
};

/// Tolerances of one comparison.
struct CompareTolerance {
  double rtol;
  double atol;
};

/// Exact scalar comparison of positions [begin, begin + count); `first_index` is the flat
/// index of position 0 of the arrays.
CompareAcc scalar_compare(const void* a, DType da, const void* b, DType db, std::int64_t begin,
                          std::int64_t count, std::int64_t first_index,
                          CompareTolerance tol) noexcept;

/// SIMD comparison of `count` contiguous positions whose first flat index is `first_index`.
CompareAcc compare_contiguous(const void* a, DType da, const void* b, DType db,
                              std::int64_t count, std::int64_t first_index,
                              CompareTolerance tol) noexcept;

}  // namespace genscope::detail
