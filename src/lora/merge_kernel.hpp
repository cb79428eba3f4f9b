// The fused merge loop for plain up·down patches: a few rows of W at a time are converted to
// float32, patched and converted back while they are still in cache, so W makes one trip
// through memory (read in its dtype, written in its dtype).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "genscope/dtype.hpp"

namespace genscope::detail {

/// One prepared up·down patch: factors as float32 and the coefficient strength·scale.
struct PreparedLora {
  std::vector<float> up;    ///< rows × rank
  std::vector<float> down;  ///< rank × cols
  std::int64_t rank = 0;
  float coefficient = 1.0f;
};

/// dst = src + Σ coefficient·up·down for a rows × cols weight stored as `dtype` (a float
/// dtype); src and dst may not overlap.
void merge_rows(const std::byte* src, std::byte* dst, DType dtype, std::int64_t rows, std::int64_t cols,
                const std::vector<PreparedLora>& patches);

}  // namespace genscope::detail
