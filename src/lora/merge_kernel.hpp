// The fused merge loop for plain up·down patches: a block of rows of W at a time is converted
// to float32, patched (sgemm, beta 1) and converted back while it is still in cache, so W
// makes one trip through memory (read in its dtype, written in its dtype).
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

/// Float32 elements of W in one block (the scratch each thread patches in place): 1 MB, the
/// size of a core's L2 on the machines measured (docs/performance.md); smaller blocks make
/// OpenBLAS re-pack `down` more often, larger ones leave L2 between convert and sgemm.
inline constexpr std::int64_t kMergeBlockElements = std::int64_t{1} << 18;
/// Rows per block for a weight of `cols` columns (a multiple of 8, at least 8).
std::int64_t merge_block_rows(std::int64_t cols) noexcept;
/// Threads worth using for a rows × cols weight: one per core, fewer for small weights.
int merge_threads(std::int64_t rows, std::int64_t cols) noexcept;

/// Bytes of merged output handed to the file writer at a time (write_safetensors fill_part):
/// a few blocks per thread, small enough to still be in cache when write() copies it.
inline constexpr std::uint64_t kMergePartBytes = std::uint64_t{4} << 20;

/// Rows [row_begin, row_end) of dst = src + Σ coefficient·up·down for a weight of `cols`
/// columns stored as `dtype` (a float dtype): `src` is the whole weight, `dst` receives just
/// those rows. Runs on `threads` threads (the caller's included), each holding OpenBLAS to
/// itself (SingleThreadedBlas); src and dst may not overlap.
void merge_rows(const std::byte* src, std::byte* dst, DType dtype, std::int64_t row_begin, std::int64_t row_end,
                std::int64_t cols, const std::vector<PreparedLora>& patches, int threads);

}  // namespace genscope::detail
