// Element-wise comparison of two tensors: error metrics, allclose verdict, worst element.
//
// Example:
//   genscope::TensorComparison c = genscope::compare_tensors(ours, reference);
//   if (!c.allclose) std::cout << c.max_abs_error << " at " << c.worst_index[0] << "\n";
#pragma once

#include <cstdint>
#include <vector>

#include "genscope/tensor_view.hpp"

namespace genscope {

/// Tolerances (NumPy's isclose: |a - b| <= atol + rtol * |b|) and threading.
struct CompareOptions {
  double rtol = 1e-5;  ///< Relative tolerance, applied to |b| (b is the reference).
  double atol = 1e-8;  ///< Absolute tolerance.
  unsigned threads = 0;  ///< 0 = hardware_concurrency; each thread gets >= 4 MiB.
};

/// The result of compare_tensors. Error metrics cover positions where both values are
/// finite; they are NaN when shapes differ or no such position exists.
struct TensorComparison {
  bool shape_match = false;  ///< Shapes are equal (element-wise metrics need this).
  bool dtype_match = false;  ///< Dtypes are equal (mixed dtypes are still compared).
  std::int64_t numel = 0;    ///< Elements compared (0 when shapes differ).
  std::int64_t compared_count = 0;   ///< Positions where both values are finite.
  double max_abs_error = 0;   ///< max |a - b|.
  double mean_abs_error = 0;  ///< mean |a - b|.
  double rmse = 0;            ///< sqrt(mean (a - b)^2).
  double max_rel_error = 0;   ///< max |a - b| / |b| (0/0 = 0, x/0 = +Inf).
  double cosine_similarity = 0;  ///< a.b / (|a| |b|); NaN when a norm is 0.
  double psnr_db = 0;  ///< 10 log10(peak^2 / MSE) with peak = max |a|; +Inf when MSE is 0.
  bool allclose = false;  ///< Shapes match and every position is close (NaN is never close).
  std::int64_t mismatch_count = 0;   ///< Positions that are not close.
  std::int64_t nan_mismatch_count = 0;  ///< Positions with NaN in exactly one tensor.
  std::int64_t worst_flat_index = -1;   ///< Flat (C-order) index of max |a - b|; -1 if none.
  std::vector<std::int64_t> worst_index;  ///< Multi-index of that element.
  double worst_a = 0;  ///< a at the worst element.
  double worst_b = 0;  ///< b at the worst element.
};

/// Compares `a` with the reference `b` in one fused pass (values converted to double).
TensorComparison compare_tensors(const TensorView& a, const TensorView& b,
                                 const CompareOptions& options = {});

}  // namespace genscope
