// SIMD moments kernels (Highway, run-time dispatch over SSE4/AVX2/AVX-512).
//
// Each block of kBlockElements elements is summarised in one pass with vector accumulators:
// f32 lanes for min/max/zero count, double lanes for sums shifted by the block's first
// element (so sum of squares does not cancel). f16 is widened in registers (PromoteTo),
// bf16 by a 16-bit shift, fp8 through a 256-entry table into a stack buffer, integers into
// a double buffer. A block whose sums are not finite holds NaN/Inf (or overflows) and is
// redone by the exact scalar path. Blocks combine with Chan's formula (Moments::merge).
// Fewer targets keep the build short; AVX3 covers AVX3_DL machines, SSE4 covers SSSE3.
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_AVX3_DL)
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tensor/stats_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>

#include "tensor/element.hpp"
#include "tensor/moments.hpp"

HWY_BEFORE_NAMESPACE();
namespace genscope::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Turns the vector sums of `count` values (shifted by `shift`) into Moments.
inline Moments FromSums(std::int64_t count, double shift, double s, double q, double mn,
                        double mx, std::int64_t zeros) {
  Moments m;
  m.n = count;
  m.mean = shift + s / static_cast<double>(count);
  m.m2 = std::max(0.0, q - s * s / static_cast<double>(count));
  m.min = mn;
  m.max = mx;
  m.zeros = zeros;
  return m;
}

// Vector part of a block whose elements load as f32 vectors; false when a sum is not finite.
// How far ahead of the loads the f32/f16/bf16 loops prefetch.
constexpr std::size_t kPrefetchAheadBytes = 4096;

template <class Load>
HWY_INLINE bool VecBlockF32(const Load& load, std::int64_t nv, double shift, Moments& out,
                            const void* prefetch_from = nullptr, std::size_t prefetch_stride = 0) {
#if HWY_TARGET == HWY_SCALAR
  (void)load, (void)nv, (void)shift, (void)out;
  return false;  // one-lane target: no halves to widen; the scalar path does the block
#else
  const hn::ScalableTag<float> df;
  const hn::Repartition<double, decltype(df)> dd;
  const hn::Half<decltype(df)> dfh;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(df));
  auto s0 = hn::Zero(dd), s1 = hn::Zero(dd), q0 = hn::Zero(dd), q1 = hn::Zero(dd);
  auto vmin = hn::Set(df, HUGE_VALF), vmax = hn::Set(df, -HUGE_VALF);
  std::int64_t z = 0;
  // Widen first, then shift: x - k in f32 would round (measured: 1e-8 relative errors).
  const auto k = hn::Set(dd, shift);
  const auto zero = hn::Zero(df);
  auto s2 = hn::Zero(dd), s3 = hn::Zero(dd), q2 = hn::Zero(dd), q3 = hn::Zero(dd);
  auto vmin2 = vmin, vmax2 = vmax;
  std::int64_t i = 0;
  // Two vectors per iteration: independent accumulator chains for more overlap.
  for (; i + 2 * N <= nv; i += 2 * N) {
    if (prefetch_from != nullptr) {
      // Software prefetch a few KiB ahead: the loop is heavy enough per byte that the
      // hardware prefetcher alone leaves memory bandwidth unused (one line per 64 bytes).
      const auto* ahead = static_cast<const std::uint8_t*>(prefetch_from);
      for (std::size_t off = static_cast<std::size_t>(i) * prefetch_stride;
           off < static_cast<std::size_t>(i + 2 * N) * prefetch_stride; off += 64) {
        __builtin_prefetch(ahead + off, 0, 3);
      }
    }
    const auto x = load(df, i);
    const auto y = load(df, i + N);
    vmin = hn::Min(vmin, x);
    vmax = hn::Max(vmax, x);
    vmin2 = hn::Min(vmin2, y);
    vmax2 = hn::Max(vmax2, y);
    z += static_cast<std::int64_t>(hn::CountTrue(df, hn::Eq(x, zero)) +
                                   hn::CountTrue(df, hn::Eq(y, zero)));
    const auto lo = hn::Sub(hn::PromoteTo(dd, hn::LowerHalf(dfh, x)), k);
    const auto hi = hn::Sub(hn::PromoteTo(dd, hn::UpperHalf(dfh, x)), k);
    const auto lo2 = hn::Sub(hn::PromoteTo(dd, hn::LowerHalf(dfh, y)), k);
    const auto hi2 = hn::Sub(hn::PromoteTo(dd, hn::UpperHalf(dfh, y)), k);
    s0 = hn::Add(s0, lo);
    s1 = hn::Add(s1, hi);
    s2 = hn::Add(s2, lo2);
    s3 = hn::Add(s3, hi2);
    q0 = hn::MulAdd(lo, lo, q0);
    q1 = hn::MulAdd(hi, hi, q1);
    q2 = hn::MulAdd(lo2, lo2, q2);
    q3 = hn::MulAdd(hi2, hi2, q3);
  }
  for (; i < nv; i += N) {
    const auto x = load(df, i);
    vmin = hn::Min(vmin, x);
    vmax = hn::Max(vmax, x);
    z += static_cast<std::int64_t>(hn::CountTrue(df, hn::Eq(x, zero)));
    const auto lo = hn::Sub(hn::PromoteTo(dd, hn::LowerHalf(dfh, x)), k);
    const auto hi = hn::Sub(hn::PromoteTo(dd, hn::UpperHalf(dfh, x)), k);
    s0 = hn::Add(s0, lo);
    s1 = hn::Add(s1, hi);
    q0 = hn::MulAdd(lo, lo, q0);
    q1 = hn::MulAdd(hi, hi, q1);
  }
  s0 = hn::Add(s0, s2);
  s1 = hn::Add(s1, s3);
  q0 = hn::Add(q0, q2);
  q1 = hn::Add(q1, q3);
  vmin = hn::Min(vmin, vmin2);
  vmax = hn::Max(vmax, vmax2);
  HWY_ALIGN double ds[64];
  HWY_ALIGN double dq[64];
  HWY_ALIGN float fmin[64];
  HWY_ALIGN float fmax[64];
  hn::Store(hn::Add(s0, s1), dd, ds);
  hn::Store(hn::Add(q0, q1), dd, dq);
  hn::Store(vmin, df, fmin);
  hn::Store(vmax, df, fmax);
  double s = 0, q = 0;
  for (size_t l = 0; l < hn::Lanes(dd); ++l) {
    s += ds[l];
    q += dq[l];
  }
  if (!std::isfinite(s) || !std::isfinite(q)) return false;
  float mn = fmin[0], mx = fmax[0];
  for (std::int64_t l = 0; l < N; ++l) {
    mn = std::min(mn, fmin[l]);
    mx = std::max(mx, fmax[l]);
  }
  out = FromSums(nv, shift, s, q, mn, mx, z);
  return true;
#endif
}

// Vector part of a block of doubles; false when a sum is not finite.
HWY_INLINE bool VecBlockF64(const double* p, std::int64_t nv, double shift, Moments& out) {
  const hn::ScalableTag<double> dd;
  const hn::RebindToSigned<decltype(dd)> di;
  const std::int64_t N = static_cast<std::int64_t>(hn::Lanes(dd));
  auto s0 = hn::Zero(dd), q0 = hn::Zero(dd);
  auto vmin = hn::Set(dd, HUGE_VAL), vmax = hn::Set(dd, -HUGE_VAL);
  auto vz = hn::Zero(di);
  const auto k = hn::Set(dd, shift);
  const auto zero = hn::Zero(dd);
  for (std::int64_t i = 0; i < nv; i += N) {
    const auto x = hn::LoadU(dd, p + i);
    vmin = hn::Min(vmin, x);
    vmax = hn::Max(vmax, x);
    vz = hn::Sub(vz, hn::BitCast(di, hn::VecFromMask(dd, hn::Eq(x, zero))));
    const auto d = hn::Sub(x, k);
    s0 = hn::Add(s0, d);
    q0 = hn::MulAdd(d, d, q0);
  }
  HWY_ALIGN double ds[64];
  HWY_ALIGN double dq[64];
  HWY_ALIGN double dmin[64];
  HWY_ALIGN double dmax[64];
  HWY_ALIGN std::int64_t iz[64];
  hn::Store(s0, dd, ds);
  hn::Store(q0, dd, dq);
  hn::Store(vmin, dd, dmin);
  hn::Store(vmax, dd, dmax);
  hn::Store(vz, di, iz);
  double s = 0, q = 0, mn = dmin[0], mx = dmax[0];
  std::int64_t z = 0;
  for (std::int64_t l = 0; l < N; ++l) {
    s += ds[l];
    q += dq[l];
    mn = std::min(mn, dmin[l]);
    mx = std::max(mx, dmax[l]);
    z += iz[l];
  }
  if (!std::isfinite(s) || !std::isfinite(q)) return false;
  out = FromSums(nv, shift, s, q, mn, mx, z);
  return true;
}

// One block: vector part plus scalar tail, or all scalar when the block is not finite.
template <class VecPart>
HWY_INLINE Moments Block(const VecPart& vec_part, std::int64_t lanes, const void* block,
                         std::int64_t n, DType block_dtype) {
  const std::int64_t nv = n / lanes * lanes;
  Moments m;
  if (nv > 0) {
    const double shift = element_to_double(block, 0, block_dtype);
    if (!std::isfinite(shift) || !vec_part(nv, shift, m)) {
      return scalar_moments(block, 0, n, block_dtype);
    }
  }
  if (nv < n) m.merge(scalar_moments(block, nv, n - nv, block_dtype));
  return m;
}

Moments SummarizeContiguous(const void* data, std::int64_t count, DType dtype) {
  const hn::ScalableTag<float> df;
  const hn::ScalableTag<double> dd;
  const std::int64_t nf = static_cast<std::int64_t>(hn::Lanes(df));
  const std::int64_t nd = static_cast<std::int64_t>(hn::Lanes(dd));
  const std::size_t esize = dtype_size(dtype);
  HWY_ALIGN float fbuf[kBlockElements];
  HWY_ALIGN double dbuf[kBlockElements];
  Moments total;
  for (std::int64_t b = 0; b < count; b += kBlockElements) {
    const std::int64_t n = std::min(kBlockElements, count - b);
    const auto* block = static_cast<const std::uint8_t*>(data) + b * esize;
    Moments m;
    switch (dtype) {
      case DType::kF32: {
        const float* p = reinterpret_cast<const float*>(block);
        auto vec = [&](std::int64_t nv, double k, Moments& o) {
          return VecBlockF32([p](auto d, std::int64_t i) { return hn::LoadU(d, p + i); }, nv,
                             k, o, block + kPrefetchAheadBytes, esize);
        };
        m = Block(vec, nf, block, n, dtype);
        break;
      }
      case DType::kF16: {
        const auto* p = reinterpret_cast<const hwy::float16_t*>(block);
        auto vec = [&](std::int64_t nv, double k, Moments& o) {
          return VecBlockF32(
              [p](auto d, std::int64_t i) {
                const hn::Rebind<hwy::float16_t, decltype(d)> dh;
                return hn::PromoteTo(d, hn::LoadU(dh, p + i));
              },
              nv, k, o, block + kPrefetchAheadBytes, esize);
        };
        m = Block(vec, nf, block, n, dtype);
        break;
      }
      case DType::kBF16: {
        const auto* p = reinterpret_cast<const std::uint16_t*>(block);
        auto vec = [&](std::int64_t nv, double k, Moments& o) {
          return VecBlockF32(
              [p](auto d, std::int64_t i) {
                const hn::RebindToUnsigned<decltype(d)> du32;
                const hn::Rebind<std::uint16_t, decltype(d)> du16;
                return hn::BitCast(
                    d, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, p + i))));
              },
              nv, k, o, block + kPrefetchAheadBytes, esize);
        };
        m = Block(vec, nf, block, n, dtype);
        break;
      }
      case DType::kF8E4M3:
      case DType::kF8E5M2: {
        const auto& table = fp8_table(dtype);
        for (std::int64_t i = 0; i < n; ++i) fbuf[i] = table[block[i]];
        const float* p = fbuf;
        auto vec = [&](std::int64_t nv, double k, Moments& o) {
          return VecBlockF32([p](auto d, std::int64_t i) { return hn::LoadU(d, p + i); }, nv,
                             k, o);
        };
        m = Block(vec, nf, fbuf, n, DType::kF32);
        break;
      }
      case DType::kF64: {
        const double* p = reinterpret_cast<const double*>(block);
        auto vec = [&](std::int64_t nv, double k, Moments& o) {
          return VecBlockF64(p, nv, k, o);
        };
        m = Block(vec, nd, block, n, dtype);
        break;
      }
      default: {  // integers and bool: exact in double up to 2^53
        to_double(block, n, dtype, dbuf);
        const double* p = dbuf;
        auto vec = [&](std::int64_t nv, double k, Moments& o) {
          return VecBlockF64(p, nv, k, o);
        };
        m = Block(vec, nd, dbuf, n, DType::kF64);
        break;
      }
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
HWY_EXPORT(SummarizeContiguous);

Moments summarize_contiguous(const void* data, std::int64_t count, DType dtype) noexcept {
  return HWY_DYNAMIC_DISPATCH(SummarizeContiguous)(data, count, dtype);
}
}  // namespace genscope::detail
#endif  // HWY_ONCE
