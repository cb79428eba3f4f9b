// out += coef · a·b for LoRA merges. Four output rows share every load of a row of b and
// columns are tiled so the four accumulating rows stay in L1; the function is compiled for
// AVX2+FMA and baseline x86-64 and picked at run time (GCC target_clones).
#include "lora/matmul.hpp"

#include <algorithm>

namespace genscope::detail {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=haswell", "default")))
#endif
void matmul_add(const float* a, const float* b, float* out, std::int64_t m, std::int64_t k,
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

}  // namespace genscope::detail
