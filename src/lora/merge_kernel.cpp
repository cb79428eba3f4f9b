// Fused convert-patch-convert over blocks of rows (see merge_kernel.hpp).
#include "lora/merge_kernel.hpp"

#include <algorithm>

#include "lora/matmul.hpp"
#include "model/float_convert.hpp"

namespace genscope::detail {

void merge_rows(const std::byte* src, std::byte* dst, DType dtype, std::int64_t rows, std::int64_t cols,
                const std::vector<PreparedLora>& patches) {
  // ~64 KB of float32 rows: stays in L2 next to the down factor.
  const std::int64_t block = std::max<std::int64_t>(4, (16384 / std::max<std::int64_t>(cols, 1)) & ~std::int64_t{3});
  const std::size_t elem = dtype_size(dtype);
  std::vector<float> buf(static_cast<std::size_t>(block * cols));
  for (std::int64_t r0 = 0; r0 < rows; r0 += block) {
    const std::int64_t n = std::min(block, rows - r0);
    const std::size_t count = static_cast<std::size_t>(n * cols);
    convert_to_f32(src, dtype, static_cast<std::size_t>(r0 * cols), count, buf.data());
    for (const PreparedLora& p : patches) {
      matmul_add(p.up.data() + r0 * p.rank, p.down.data(), buf.data(), n, p.rank, cols, p.coefficient);
    }
    convert_from_f32(buf.data(), count, dtype, dst + static_cast<std::size_t>(r0 * cols) * elem);
  }
}

}  // namespace genscope::detail
