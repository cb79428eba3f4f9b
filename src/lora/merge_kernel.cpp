// Fused convert-patch-convert over blocks of rows (see merge_kernel.hpp). Large weights hand
// their blocks out over OpenMP threads, each with its own scratch block; the sgemm inside
// runs on its caller's thread (SingleThreadedBlas), so the two thread pools never stack up.
#include "lora/merge_kernel.hpp"

#include <omp.h>

#include <algorithm>

#include "lora/matmul.hpp"
#include "model/float_convert.hpp"

namespace genscope::detail {
namespace {

// Below this many elements a thread costs more than it saves.
constexpr std::int64_t kMinElementsPerThread = std::int64_t{1} << 19;

void merge_row_range(const std::byte* src, std::byte* dst, DType dtype, std::int64_t row_begin,
                     std::int64_t row_end, std::int64_t cols, std::int64_t block,
                     const std::vector<PreparedLora>& patches, std::vector<float>& buf) {
  const std::size_t elem = dtype_size(dtype);
  for (std::int64_t r0 = row_begin; r0 < row_end; r0 += block) {
    const std::int64_t n = std::min(block, row_end - r0);
    const std::size_t count = static_cast<std::size_t>(n * cols);
    convert_to_f32(src, dtype, static_cast<std::size_t>(r0 * cols), count, buf.data());
    for (const PreparedLora& p : patches) {
      matmul_add(p.up.data() + r0 * p.rank, p.down.data(), buf.data(), n, p.rank, cols, p.coefficient);
    }
    convert_from_f32(buf.data(), count, dtype, dst + static_cast<std::size_t>(r0 * cols) * elem);
  }
}

}  // namespace

std::int64_t merge_block_rows(std::int64_t cols) noexcept {
  return std::max<std::int64_t>(8, (kMergeBlockElements / std::max<std::int64_t>(cols, 1)) & ~std::int64_t{7});
}

int merge_threads(std::int64_t rows, std::int64_t cols) noexcept {
  const std::int64_t by_size = std::max<std::int64_t>(1, rows * cols / kMinElementsPerThread);
  const std::int64_t by_rows = std::max<std::int64_t>(1, rows / merge_block_rows(cols));
  return static_cast<int>(std::min({static_cast<std::int64_t>(omp_get_max_threads()), by_size, by_rows}));
}

void merge_rows(const std::byte* src, std::byte* dst, DType dtype, std::int64_t rows, std::int64_t cols,
                const std::vector<PreparedLora>& patches) {
  const std::int64_t block = merge_block_rows(cols);
  const int threads = merge_threads(rows, cols);
  std::vector<std::vector<float>> bufs(static_cast<std::size_t>(threads));
  for (auto& b : bufs) b.resize(static_cast<std::size_t>(std::min(block, rows) * cols));
  if (threads <= 1) {
    merge_row_range(src, dst, dtype, 0, rows, cols, block, patches, bufs[0]);
    return;
  }
  const SingleThreadedBlas blas_on_callers;
  // Dynamic team sizes for this region only (omp_set_dynamic is per thread): libgomp then gives
  // it only the cores the load average leaves free, because on an oversubscribed machine every
  // join would wait for a descheduled thread (measured: 10× slower than one thread).
  const int dynamic = omp_get_dynamic();
  omp_set_dynamic(1);
  // Blocks are handed out one at a time: a slower thread takes fewer of them.
  const std::int64_t blocks = (rows + block - 1) / block;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (std::int64_t b = 0; b < blocks; ++b) {
    merge_row_range(src, dst, dtype, b * block, std::min(rows, (b + 1) * block), cols, block, patches,
                    bufs[static_cast<std::size_t>(omp_get_thread_num())]);
  }
  omp_set_dynamic(dynamic);
}

}  // namespace genscope::detail
