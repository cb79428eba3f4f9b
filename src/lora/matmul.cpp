// out += coef · a·b for LoRA merges. On CPUs with AVX2+FMA a register-blocked kernel keeps a
// 4×16 block of `out` in registers for the whole k loop (one load/store of out per block,
// 8 FMAs per 2 loads of b); elsewhere a portable loop shares each row of b between four
// rows of out.
#include "lora/matmul.hpp"

#include <algorithm>
#include <vector>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace genscope::detail {
namespace {

void matmul_add_portable(const float* a, const float* b, float* out, std::int64_t m, std::int64_t k,
                         std::int64_t n, float coef) noexcept {
  constexpr std::int64_t kTile = 512;
  for (std::int64_t c0 = 0; c0 < n; c0 += kTile) {
    const std::int64_t c1 = std::min(n, c0 + kTile);
    std::int64_t i = 0;
    for (; i + 4 <= m; i += 4) {
      float* __restrict r0 = out + (i + 0) * n;
      float* __restrict r1 = out + (i + 1) * n;
      float* __restrict r2 = out + (i + 2) * n;
      float* __restrict r3 = out + (i + 3) * n;
      for (std::int64_t j = 0; j < k; ++j) {
        const float s0 = coef * a[(i + 0) * k + j], s1 = coef * a[(i + 1) * k + j];
        const float s2 = coef * a[(i + 2) * k + j], s3 = coef * a[(i + 3) * k + j];
        const float* __restrict br = b + j * n;
        for (std::int64_t c = c0; c < c1; ++c) {
          const float v = br[c];
          r0[c] += s0 * v;
          r1[c] += s1 * v;
          r2[c] += s2 * v;
          r3[c] += s3 * v;
        }
      }
    }
    for (; i < m; ++i) {
      float* __restrict r0 = out + i * n;
      for (std::int64_t j = 0; j < k; ++j) {
        const float s0 = coef * a[i * k + j];
        const float* __restrict br = b + j * n;
        for (std::int64_t c = c0; c < c1; ++c) r0[c] += s0 * br[c];
      }
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) void matmul_add_avx2(const float* a, const float* b, float* out,
                                                         std::int64_t m, std::int64_t k, std::int64_t n,
                                                         float coef) noexcept {
  std::vector<float> sa(static_cast<std::size_t>(4 * k));  // coef·a for the current 4 rows
  std::int64_t i = 0;
  for (; i + 4 <= m; i += 4) {
    for (std::int64_t r = 0; r < 4; ++r)
      for (std::int64_t j = 0; j < k; ++j) sa[r * k + j] = coef * a[(i + r) * k + j];
    float* o0 = out + (i + 0) * n;
    float* o1 = out + (i + 1) * n;
    float* o2 = out + (i + 2) * n;
    float* o3 = out + (i + 3) * n;
    std::int64_t c = 0;
    for (; c + 16 <= n; c += 16) {
      __m256 a00 = _mm256_loadu_ps(o0 + c), a01 = _mm256_loadu_ps(o0 + c + 8);
      __m256 a10 = _mm256_loadu_ps(o1 + c), a11 = _mm256_loadu_ps(o1 + c + 8);
      __m256 a20 = _mm256_loadu_ps(o2 + c), a21 = _mm256_loadu_ps(o2 + c + 8);
      __m256 a30 = _mm256_loadu_ps(o3 + c), a31 = _mm256_loadu_ps(o3 + c + 8);
      for (std::int64_t j = 0; j < k; ++j) {
        const __m256 b0 = _mm256_loadu_ps(b + j * n + c), b1 = _mm256_loadu_ps(b + j * n + c + 8);
        __m256 s = _mm256_broadcast_ss(&sa[j]);
        a00 = _mm256_fmadd_ps(s, b0, a00);
        a01 = _mm256_fmadd_ps(s, b1, a01);
        s = _mm256_broadcast_ss(&sa[k + j]);
        a10 = _mm256_fmadd_ps(s, b0, a10);
        a11 = _mm256_fmadd_ps(s, b1, a11);
        s = _mm256_broadcast_ss(&sa[2 * k + j]);
        a20 = _mm256_fmadd_ps(s, b0, a20);
        a21 = _mm256_fmadd_ps(s, b1, a21);
        s = _mm256_broadcast_ss(&sa[3 * k + j]);
        a30 = _mm256_fmadd_ps(s, b0, a30);
        a31 = _mm256_fmadd_ps(s, b1, a31);
      }
      _mm256_storeu_ps(o0 + c, a00);
      _mm256_storeu_ps(o0 + c + 8, a01);
      _mm256_storeu_ps(o1 + c, a10);
      _mm256_storeu_ps(o1 + c + 8, a11);
      _mm256_storeu_ps(o2 + c, a20);
      _mm256_storeu_ps(o2 + c + 8, a21);
      _mm256_storeu_ps(o3 + c, a30);
      _mm256_storeu_ps(o3 + c + 8, a31);
    }
    for (; c < n; ++c) {
      float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (std::int64_t j = 0; j < k; ++j) {
        const float v = b[j * n + c];
        s0 += sa[j] * v;
        s1 += sa[k + j] * v;
        s2 += sa[2 * k + j] * v;
        s3 += sa[3 * k + j] * v;
      }
      o0[c] += s0;
      o1[c] += s1;
      o2[c] += s2;
      o3[c] += s3;
    }
  }
  if (i < m) matmul_add_portable(a + i * k, b, out + i * n, m - i, k, n, coef);
}

bool have_avx2_fma() noexcept {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}
#endif

}  // namespace

void matmul_add(const float* a, const float* b, float* out, std::int64_t m, std::int64_t k,
                std::int64_t n, float coef) noexcept {
#if defined(__x86_64__) && defined(__GNUC__)
  if (have_avx2_fma()) {
    matmul_add_avx2(a, b, out, m, k, n, coef);
    return;
  }
#endif
  matmul_add_portable(a, b, out, m, k, n, coef);
}

}  // namespace genscope::detail
