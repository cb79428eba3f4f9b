// Fused convert-patch-convert over blocks of rows (see merge_kernel.hpp), split over threads
// for large weights: each thread owns a contiguous range of rows and its own scratch block.
#include "lora/merge_kernel.hpp"

#include <algorithm>
#include <thread>

#include "lora/matmul.hpp"
#include "model/float_convert.hpp"

namespace genscope::detail {
namespace {

// Below this many elements a thread costs more than it saves.
constexpr std::int64_t kMinElementsPerThread = std::int64_t{1} << 19;

void merge_row_range(const std::byte* src, std::byte* dst, DType dtype, std::int64_t row_begin,
                     std::int64_t row_end, std::int64_t cols,
                     const std::vector<PreparedLora>& patches) {
  // ~64 KB of float32 rows: stays in L2 next to the down factor.
  const std::int64_t block =
      std::max<std::int64_t>(4, (16384 / std::max<std::int64_t>(cols, 1)) & ~std::int64_t{3});
  const std::size_t elem = dtype_size(dtype);
  std::vector<float> buf(static_cast<std::size_t>(block * cols));
  for (std::int64_t r0 = row_begin; r0 < row_end; r0 += block) {
    const std::int64_t n = std::min(block, row_end - r0);
    const std::size_t count = static_cast<std::size_t>(n * cols);
    convert_to_f32(src, dtype, static_cast<std::size_t>(r0 * cols), count, buf.data());
    for (const PreparedLora& p : patches) {
      matmul_add(p.up.data() + r0 * p.rank, p.down.data(), buf.data(), n, p.rank, cols,
                 p.coefficient);
    }
    convert_from_f32(buf.data(), count, dtype, dst + static_cast<std::size_t>(r0 * cols) * elem);
  }
}

}  // namespace

void merge_rows(const std::byte* src, std::byte* dst, DType dtype, std::int64_t rows,
                std::int64_t cols, const std::vector<PreparedLora>& patches) {
  const auto hardware = static_cast<std::int64_t>(std::max(1u, std::thread::hardware_concurrency()));
  const std::int64_t threads =
      std::clamp<std::int64_t>(rows * cols / kMinElementsPerThread, 1, std::min(hardware, rows));
  if (threads <= 1) {
    merge_row_range(src, dst, dtype, 0, rows, cols, patches);
    return;
  }
  std::vector<std::thread> workers;
  const std::int64_t per = (rows + threads - 1) / threads;
  for (std::int64_t t = 1; t < threads; ++t) {
    const std::int64_t begin = std::min(rows, t * per), end = std::min(rows, begin + per);
    if (begin < end) {
      workers.emplace_back(merge_row_range, src, dst, dtype, begin, end, cols, std::cref(patches));
    }
  }
  merge_row_range(src, dst, dtype, 0, std::min(rows, per), cols, patches);
  for (std::thread& w : workers) w.join();
}

}  // namespace genscope::detail
