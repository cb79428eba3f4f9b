// CompareAcc merging and the exact scalar comparison (tails, blocks with NaN/Inf).
#include "tensor/compare_acc.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tensor/element.hpp"

namespace genscope::detail {

void CompareAcc::merge(const CompareAcc& o) noexcept {
  compared += o.compared;
  mismatch += o.mismatch;
  nan_mismatch += o.nan_mismatch;
  sum_abs += o.sum_abs;
  sum_sq += o.sum_sq;
  sum_ab += o.sum_ab;
  sum_aa += o.sum_aa;
  sum_bb += o.sum_bb;
  max_rel = std::max(max_rel, o.max_rel);
  peak_a = std::max(peak_a, o.peak_a);
  if (o.max_abs > max_abs) {  // strictly greater keeps the first occurrence
    max_abs = o.max_abs;
    worst = o.worst;
    worst_a = o.worst_a;
    worst_b = o.worst_b;
  }
}

CompareAcc scalar_compare(const void* a, DType da, const void* b, DType db, std::int64_t begin,
                          std::int64_t count, std::int64_t first_index,
                          CompareTolerance tol) noexcept {
  CompareAcc acc;
  for (std::int64_t i = begin; i < begin + count; ++i) {
    const double x = element_to_double(a, i, da);
    const double y = element_to_double(b, i, db);
    if (std::isnan(x) != std::isnan(y)) ++acc.nan_mismatch;
    if (!std::isfinite(x) || !std::isfinite(y)) {
      if (!(x == y)) ++acc.mismatch;  // equal infinities are close; NaN never is
      continue;
    }
    const double d = x - y;
    const double ad = std::fabs(d);
    if (!(ad <= tol.atol + tol.rtol * std::fabs(y))) ++acc.mismatch;
    ++acc.compared;
    acc.sum_abs += ad;
    acc.sum_sq += d * d;
    acc.sum_ab += x * y;
    acc.sum_aa += x * x;
    acc.sum_bb += y * y;
    acc.peak_a = std::max(acc.peak_a, std::fabs(x));
    const double rel = ad == 0 ? 0.0
                       : y == 0 ? std::numeric_limits<double>::infinity()
                                : ad / std::fabs(y);
    acc.max_rel = std::max(acc.max_rel, rel);
    if (ad > acc.max_abs) {
      acc.max_abs = ad;
      acc.worst = first_index + i;
      acc.worst_a = x;
      acc.worst_b = y;
    }
  }
  return acc;
}

}  // namespace genscope::detail
