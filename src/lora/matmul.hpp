// The small dense kernel behind merges: out += coef · a·b, with a tall and thin (m×k, k ≤ a
// few hundred) and b wide (k×n).
#pragma once

#include <cstdint>

namespace genscope::detail {

/// out (m×n) += coef · a (m×k) · b (k×n), all row-major float32.
void matmul_add(const float* a, const float* b, float* out, std::int64_t m, std::int64_t k,
                std::int64_t n, float coef) noexcept;

}  // namespace genscope::detail
