// compare_tensors: validation, threading, strided gathering and the final metrics.
#include "genscope/tensor_compare.hpp"

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "tensor/compare_acc.hpp"
#include "tensor/element.hpp"
#include "tensor/validate.hpp"

namespace genscope {
namespace {

detail::CompareAcc compare_threaded(const TensorView& a, const TensorView& b, unsigned threads,
                                    detail::CompareTolerance tol) {
  const std::int64_t n = a.numel();
  const std::int64_t blocks = (n + detail::kBlockElements - 1) / detail::kBlockElements;
  const std::int64_t per = (blocks + threads - 1) / threads * detail::kBlockElements;
  std::vector<detail::CompareAcc> parts(threads);
  const std::size_t sa = dtype_size(a.dtype);
  const std::size_t sb = dtype_size(b.dtype);
  auto work = [&](unsigned t) {
    const std::int64_t begin = std::min<std::int64_t>(n, t * per);
    const std::int64_t end = std::min<std::int64_t>(n, begin + per);
    parts[t] = detail::compare_contiguous(
        static_cast<const std::uint8_t*>(a.data) + begin * sa, a.dtype,
        static_cast<const std::uint8_t*>(b.data) + begin * sb, b.dtype, end - begin, begin, tol);
  };
  {
    std::vector<std::jthread> pool;
    for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work, t);
    work(0);
  }
  detail::CompareAcc total;
  for (const detail::CompareAcc& p : parts) total.merge(p);
  return total;
}

detail::CompareAcc compare_strided(const TensorView& a, const TensorView& b,
                                   detail::CompareTolerance tol) {
  std::vector<std::uint8_t> abuf(detail::kBlockElements * dtype_size(a.dtype));
  std::vector<std::uint8_t> bbuf(detail::kBlockElements * dtype_size(b.dtype));
  detail::Gatherer ga(a);
  detail::Gatherer gb(b);
  detail::CompareAcc total;
  std::int64_t first = 0;
  for (std::int64_t n; (n = ga.next(abuf.data())) > 0; first += n) {
    gb.next(bbuf.data());  // same numel: same run lengths
    total.merge(detail::compare_contiguous(abuf.data(), a.dtype, bbuf.data(), b.dtype, n, first,
                                           tol));
  }
  return total;
}

}  // namespace

TensorComparison compare_tensors(const TensorView& a, const TensorView& b,
                                 const CompareOptions& options) {
  detail::validate_view(a, "a");
  detail::validate_view(b, "b");
  TensorComparison out;
  out.shape_match = a.shape == b.shape;
  out.dtype_match = a.dtype == b.dtype;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (!out.shape_match) {
    out.max_abs_error = out.mean_abs_error = out.rmse = out.max_rel_error = nan;
    out.cosine_similarity = out.psnr_db = nan;
    return out;
  }
  out.numel = a.numel();
  const detail::CompareTolerance tol{options.rtol, options.atol};
  detail::CompareAcc acc;
  if (a.is_contiguous() && b.is_contiguous()) {
    const unsigned threads = detail::plan_threads(a.nbytes() + b.nbytes(), options.threads);
    acc = compare_threaded(a, b, threads, tol);
  } else {
    acc = compare_strided(a, b, tol);
  }
  out.compared_count = acc.compared;
  out.mismatch_count = acc.mismatch;
  out.nan_mismatch_count = acc.nan_mismatch;
  out.allclose = acc.mismatch == 0;
  if (acc.compared == 0) {
    out.max_abs_error = out.mean_abs_error = out.rmse = out.max_rel_error = nan;
    out.cosine_similarity = out.psnr_db = nan;
    return out;
  }
  const double n = static_cast<double>(acc.compared);
  out.max_abs_error = acc.max_abs;
  out.mean_abs_error = acc.sum_abs / n;
  const double mse = acc.sum_sq / n;
  out.rmse = std::sqrt(mse);
  out.max_rel_error = acc.max_rel;
  const double norms = std::sqrt(acc.sum_aa) * std::sqrt(acc.sum_bb);
  out.cosine_similarity = norms > 0 ? acc.sum_ab / norms : nan;
  out.psnr_db = mse == 0 ? std::numeric_limits<double>::infinity()
                : acc.peak_a == 0 ? -std::numeric_limits<double>::infinity()
                                  : 10.0 * std::log10(acc.peak_a * acc.peak_a / mse);
  out.worst_flat_index = acc.worst;
  out.worst_a = acc.worst_a;
  out.worst_b = acc.worst_b;
  if (acc.worst >= 0) {
    out.worst_index.assign(a.shape.size(), 0);
    std::int64_t rest = acc.worst;
    for (std::size_t d = a.shape.size(); d-- > 0;) {
      out.worst_index[d] = rest % a.shape[d];
      rest /= a.shape[d];
    }
  }
  return out;
}

}  // namespace genscope
