// SIMD comparison kernels (Highway, run-time dispatch).
//
// One pass per block of kBlockElements positions: both operands are loaded as f32 vectors
// (f16 widened in registers, bf16 by a 16-bit shift) and widened to double for the sums
// (|d|, d^2, ab, a^2, b^2), the max |d| and the isclose mismatch count; the relative error
// is divided in f32 (accurate to ~1e-7 relative, a division per f64 lane would cost more
// than the memory read). Same-dtype f64 uses f64 lanes; mixed dtypes, fp8 and integers are
// converted to double buffers first. Blocks whose sums are not finite (NaN/Inf inside) are
// redone by the exact scalar path; the worst element is located by a scalar rescan of a
// block only when that block raised the maximum.
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_AVX3_DL)
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tensor/compare_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>

#include "tensor/compare_acc.hpp"
#include "tensor/element.hpp"

HWY_BEFORE_NAMESPACE();
namespace genscope::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Horizontal sum / max of a vector through memory (lane counts differ per target).
template <class D, class V>
HWY_INLINE double LaneSum(D d, V v) {
  HWY_ALIGN hn::TFromD<D> buf[64];
  hn::Store(v, d, buf);
  double s = 0;
  for (size_t i = 0; i < hn::Lanes(d); ++i) s += static_cast<double>(buf[i]);
  return s;
}
template <class D, class V>
HWY_INLINE double LaneMax(D d, V v) {
  HWY_ALIGN hn::TFromD<D> buf[64];
  hn::Store(v, d, buf);
  double m = static_cast<double>(buf[0]);
  for (size_t i = 1; i < hn::Lanes(d); ++i) m = std::max(m, static_cast<double>(buf[i]));
  return m;
}

// Accumulators in double lanes for one half of an f32 vector (or a whole f64 vector).
template <class DD>
struct HalfAcc {
  using V = hn::Vec<DD>;
  using VI = hn::Vec<hn::RebindToSigned<DD>>;
  V sabs, ssq, sab, saa, sbb, vmax;
  VI vmis;
  explicit HalfAcc(DD dd)
      : sabs(hn::Zero(dd)), ssq(hn::Zero(dd)), sab(hn::Zero(dd)), saa(hn::Zero(dd)),
        sbb(hn::Zero(dd)), vmax(hn::Zero(dd)), vmis(hn::Zero(hn::RebindToSigned<DD>())) {}
  HWY_INLINE void Add(DD dd, V a, V b, V vrtol, V vatol) {
    const hn::RebindToSigned<DD> di;
    const V d = hn::Sub(a, b);
    const V ad = hn::Abs(d);
    sabs = hn::Add(sabs, ad);
    ssq = hn::MulAdd(d, d, ssq);
    sab = hn::MulAdd(a, b, sab);
    saa = hn::MulAdd(a, a, saa);
    sbb = hn::MulAdd(b, b, sbb);
    vmax = hn::Max(vmax, ad);
    const V tol = hn::MulAdd(vrtol, hn::Abs(b), vatol);
    vmis = hn::Sub(vmis, hn::BitCast(di, hn::VecFromMask(dd, hn::Gt(ad, tol))));
  }
  // Moves the lane sums into `acc`; false when a sum is not finite.
  HWY_INLINE bool Finish(DD dd, std::int64_t nv, CompareAcc& acc, double& block_max) const {
    const hn::RebindToSigned<DD> di;
    acc.sum_aa = LaneSum(dd, saa);
    acc.sum_bb = LaneSum(dd, sbb);
    acc.sum_sq = LaneSum(dd, ssq);
    if (!std::isfinite(acc.sum_aa) || !std::isfinite(acc.sum_bb) || !std::isfinite(acc.sum_sq)) {
      return false;
    }
    acc.sum_abs = LaneSum(dd, sabs);
    acc.sum_ab = LaneSum(dd, sab);
    acc.mismatch = static_cast<std::int64_t>(LaneSum(di, vmis));
    acc.compared = nv;
    block_max = LaneMax(dd, vmax);
    return true;
  }
};

// How far ahead of the loads both streams are prefetched (see stats_kernels.cpp).
constexpr std::size_t kPrefetchAheadBytes = 4096;

// One prefetch per cache line of [i, i + count) elements of each stream, kPrefetchAheadBytes
// ahead; null streams are skipped.
HWY_INLINE void PrefetchStreams(const void* a, const void* b, std::size_t esize, std::int64_t i,
                                std::int64_t count) {
  if (a == nullptr) return;
  const std::size_t begin = static_cast<std::size_t>(i) * esize + kPrefetchAheadBytes;
  const std::size_t end = begin + static_cast<std::size_t>(count) * esize;
  for (std::size_t off = begin; off < end; off += 64) {
    __builtin_prefetch(static_cast<const std::uint8_t*>(a) + off, 0, 3);
    __builtin_prefetch(static_cast<const std::uint8_t*>(b) + off, 0, 3);
  }
}

template <class LoadA, class LoadB>
HWY_INLINE bool VecCompareF32(const LoadA& la, const LoadB& lb, std::int64_t nv,
                              CompareTolerance tol, CompareAcc& acc, double& block_max,
                              const void* prefetch_a = nullptr, const void* prefetch_b = nullptr,
                              std::size_t esize = 0) {
#if HWY_TARGET == HWY_SCALAR
  (void)la, (void)lb, (void)nv, (void)tol, (void)acc, (void)block_max;
  return false;  // one-lane target: the scalar path does the block
#else
  const hn::ScalableTag<float> df;
  const hn::Repartition<double, decltype(df)> dd;
  const hn::Half<decltype(df)> dfh;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(df));
  HalfAcc<decltype(dd)> lo(dd), hi(dd);
  auto vrel = hn::Zero(df), vpeak = hn::Zero(df);
  const auto vrtol = hn::Set(dd, tol.rtol), vatol = hn::Set(dd, tol.atol);
  const auto zero = hn::Zero(df);
  for (std::int64_t i = 0; i < nv; i += N) {
    PrefetchStreams(prefetch_a, prefetch_b, esize, i, N);
    const auto a = la(df, i);
    const auto b = lb(df, i);
    vpeak = hn::Max(vpeak, hn::Abs(a));
    const auto d32 = hn::Sub(a, b);
    const auto rel = hn::Div(hn::Abs(d32), hn::Abs(b));
    vrel = hn::Max(vrel, hn::IfThenZeroElse(hn::Eq(d32, zero), rel));
    lo.Add(dd, hn::PromoteTo(dd, hn::LowerHalf(dfh, a)), hn::PromoteTo(dd, hn::LowerHalf(dfh, b)),
           vrtol, vatol);
    hi.Add(dd, hn::PromoteTo(dd, hn::UpperHalf(dfh, a)), hn::PromoteTo(dd, hn::UpperHalf(dfh, b)),
           vrtol, vatol);
  }
  CompareAcc ahi;
  double max_lo = 0, max_hi = 0;
  if (!lo.Finish(dd, nv, acc, max_lo) || !hi.Finish(dd, 0, ahi, max_hi)) return false;
  acc.sum_abs += ahi.sum_abs;
  acc.sum_sq += ahi.sum_sq;
  acc.sum_ab += ahi.sum_ab;
  acc.sum_aa += ahi.sum_aa;
  acc.sum_bb += ahi.sum_bb;
  acc.mismatch += ahi.mismatch;
  acc.max_rel = LaneMax(df, vrel);
  acc.peak_a = LaneMax(df, vpeak);
  block_max = std::max(max_lo, max_hi);
  return true;
#endif
}

HWY_INLINE bool VecCompareF64(const double* pa, const double* pb, std::int64_t nv,
                              CompareTolerance tol, CompareAcc& acc, double& block_max) {
  const hn::ScalableTag<double> dd;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(dd));
  HalfAcc<decltype(dd)> h(dd);
  auto vrel = hn::Zero(dd), vpeak = hn::Zero(dd);
  const auto vrtol = hn::Set(dd, tol.rtol), vatol = hn::Set(dd, tol.atol);
  const auto zero = hn::Zero(dd);
  for (std::int64_t i = 0; i < nv; i += N) {
    const auto a = hn::LoadU(dd, pa + i);
    const auto b = hn::LoadU(dd, pb + i);
    vpeak = hn::Max(vpeak, hn::Abs(a));
    const auto d = hn::Sub(a, b);
    const auto rel = hn::Div(hn::Abs(d), hn::Abs(b));
    vrel = hn::Max(vrel, hn::IfThenZeroElse(hn::Eq(d, zero), rel));
    h.Add(dd, a, b, vrtol, vatol);
  }
  if (!h.Finish(dd, nv, acc, block_max)) return false;
  acc.max_rel = LaneMax(dd, vrel);
  acc.peak_a = LaneMax(dd, vpeak);
  return true;
}

// One block: vector part, scalar tail, worst-element rescan; all scalar when not finite.
template <class VecPart>
HWY_INLINE CompareAcc Block(const VecPart& vec_part, std::int64_t lanes, const void* a,
                            DType da, const void* b, DType db, std::int64_t n,
                            std::int64_t first_index, CompareTolerance tol,
                            double running_max) {
  const std::int64_t nv = n / lanes * lanes;
  CompareAcc acc;
  if (nv > 0) {
    double block_max = 0;
    if (!vec_part(nv, acc, block_max)) return scalar_compare(a, da, b, db, 0, n, first_index, tol);
    acc.max_abs = block_max;
    if (block_max > running_max) {  // locate it: first position with |a - b| == block_max
      for (std::int64_t i = 0; i < nv; ++i) {
        const double x = element_to_double(a, i, da);
        const double y = element_to_double(b, i, db);
        if (std::fabs(x - y) == block_max) {
          acc.worst = first_index + i;
          acc.worst_a = x;
          acc.worst_b = y;
          break;
        }
      }
    }
  }
  if (nv < n) acc.merge(scalar_compare(a, da, b, db, nv, n - nv, first_index, tol));
  return acc;
}

template <class T>
HWY_INLINE const T* At(const void* p, std::int64_t i) {
  return reinterpret_cast<const T*>(static_cast<const std::uint8_t*>(p)) + i;
}

CompareAcc CompareContiguous(const void* a, DType da, const void* b, DType db,
                             std::int64_t count, std::int64_t first_index,
                             CompareTolerance tol) {
  const std::int64_t nf = static_cast<std::int64_t>(hn::Lanes(hn::ScalableTag<float>()));
  const std::int64_t nd = static_cast<std::int64_t>(hn::Lanes(hn::ScalableTag<double>()));
  HWY_ALIGN double abuf[kBlockElements];
  HWY_ALIGN double bbuf[kBlockElements];
  const bool same = da == db;
  CompareAcc total;
  for (std::int64_t s = 0; s < count; s += kBlockElements) {
    const std::int64_t n = std::min(kBlockElements, count - s);
    const std::int64_t first = first_index + s;
    CompareAcc m;
    if (same && da == DType::kF32) {
      const float* pa = At<float>(a, s);
      const float* pb = At<float>(b, s);
      auto vec = [&](std::int64_t nv, CompareAcc& o, double& bm) {
        return VecCompareF32([pa](auto d, std::int64_t i) { return hn::LoadU(d, pa + i); },
                             [pb](auto d, std::int64_t i) { return hn::LoadU(d, pb + i); }, nv,
                             tol, o, bm, pa, pb, sizeof(float));
      };
      m = Block(vec, nf, pa, da, pb, db, n, first, tol, total.max_abs);
    } else if (same && da == DType::kF16) {
      const auto* pa = At<hwy::float16_t>(a, s);
      const auto* pb = At<hwy::float16_t>(b, s);
      auto load = [](const hwy::float16_t* p) {
        return [p](auto d, std::int64_t i) {
          const hn::Rebind<hwy::float16_t, decltype(d)> dh;
          return hn::PromoteTo(d, hn::LoadU(dh, p + i));
        };
      };
      auto vec = [&](std::int64_t nv, CompareAcc& o, double& bm) {
        return VecCompareF32(load(pa), load(pb), nv, tol, o, bm, pa, pb, 2);
      };
      m = Block(vec, nf, pa, da, pb, db, n, first, tol, total.max_abs);
    } else if (same && da == DType::kBF16) {
      const auto* pa = At<std::uint16_t>(a, s);
      const auto* pb = At<std::uint16_t>(b, s);
      auto load = [](const std::uint16_t* p) {
        return [p](auto d, std::int64_t i) {
          const hn::RebindToUnsigned<decltype(d)> du32;
          const hn::Rebind<std::uint16_t, decltype(d)> du16;
          return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, p + i))));
        };
      };
      auto vec = [&](std::int64_t nv, CompareAcc& o, double& bm) {
        return VecCompareF32(load(pa), load(pb), nv, tol, o, bm, pa, pb, 2);
      };
      m = Block(vec, nf, pa, da, pb, db, n, first, tol, total.max_abs);
    } else {
      const double* pa;
      const double* pb;
      if (same && da == DType::kF64) {
        pa = At<double>(a, s);
        pb = At<double>(b, s);
      } else {
        to_double(static_cast<const std::uint8_t*>(a) + s * dtype_size(da), n, da, abuf);
        to_double(static_cast<const std::uint8_t*>(b) + s * dtype_size(db), n, db, bbuf);
        pa = abuf;
        pb = bbuf;
      }
      auto vec = [&](std::int64_t nv, CompareAcc& o, double& bm) {
        return VecCompareF64(pa, pb, nv, tol, o, bm);
      };
      m = Block(vec, nd, pa, DType::kF64, pb, DType::kF64, n, first, tol, total.max_abs);
    }
    total.merge(m);
  }
  return total;
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace genscope::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace genscope::detail {
HWY_EXPORT(CompareContiguous);

CompareAcc compare_contiguous(const void* a, DType da, const void* b, DType db,
                              std::int64_t count, std::int64_t first_index,
                              CompareTolerance tol) noexcept {
  return HWY_DYNAMIC_DISPATCH(CompareContiguous)(a, da, b, db, count, first_index, tol);
}
}  // namespace genscope::detail
#endif  // HWY_ONCE
