// Fused convert-patch-convert over blocks of rows (see merge_kernel.hpp). Large weights hand
// their blocks out, one at a time, to worker threads plus the caller, each with its own
// scratch block and each holding OpenBLAS to itself (SingleThreadedBlas). Plain std::threads,
// not OpenMP: a merge runs one short parallel section per tensor between file writes, and
// idle OpenMP workers spin (libgomp's default wait policy) after every region — a quarter of
// the CPU of an SDXL merge went to spinning (measured with perf) — while a joined std::thread
// sleeps.
#include "lora/merge_kernel.hpp"

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>

#include "lora/matmul.hpp"
#include "model/float_convert.hpp"

namespace genscope::detail {
namespace {

// Below this many elements per thread a thread costs more than it saves.
constexpr std::int64_t kMinElementsPerThread = std::int64_t{1} << 19;

// Rows [r0, r0 + n) of the weight `src` into `dst` (which starts at row `first` of it).
void merge_block(const std::byte* src, std::byte* dst, DType dtype, std::int64_t first, std::int64_t r0,
                 std::int64_t n, std::int64_t cols, const std::vector<PreparedLora>& patches, float* buf) {
  const std::size_t count = static_cast<std::size_t>(n * cols);
  convert_to_f32(src, dtype, static_cast<std::size_t>(r0 * cols), count, buf);
  for (const PreparedLora& p : patches) {
    matmul_add(p.up.data() + r0 * p.rank, p.down.data(), buf, n, p.rank, cols, p.coefficient);
  }
  convert_from_f32(buf, count, dtype, dst + static_cast<std::size_t>((r0 - first) * cols) * dtype_size(dtype));
}

}  // namespace

std::int64_t merge_block_rows(std::int64_t cols) noexcept {
  return std::max<std::int64_t>(8, (kMergeBlockElements / std::max<std::int64_t>(cols, 1)) & ~std::int64_t{7});
}

int merge_threads(std::int64_t rows, std::int64_t cols) noexcept {
  const std::int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  const std::int64_t by_size = std::max<std::int64_t>(1, rows * cols / kMinElementsPerThread);
  const std::int64_t by_rows = std::max<std::int64_t>(1, rows / merge_block_rows(cols));
  return static_cast<int>(std::min({cores, by_size, by_rows}));
}

void merge_rows(const std::byte* src, std::byte* dst, DType dtype, std::int64_t row_begin, std::int64_t row_end,
                std::int64_t cols, const std::vector<PreparedLora>& patches, int threads) {
  const std::int64_t rows = row_end - row_begin;
  if (rows <= 0) return;
  const std::int64_t block = merge_block_rows(cols);
  const std::int64_t blocks = (rows + block - 1) / block;
  threads = static_cast<int>(std::clamp<std::int64_t>(threads, 1, blocks));
  std::atomic<std::int64_t> next{0};
  const auto work = [&] {
    const SingleThreadedBlas blas_on_this_thread;
    // Uninitialised: every block is converted into it before use.
    const auto buf = std::make_unique_for_overwrite<float[]>(static_cast<std::size_t>(std::min(block, rows) * cols));
    for (std::int64_t b = next++; b < blocks; b = next++) {
      const std::int64_t r0 = row_begin + b * block;
      merge_block(src, dst, dtype, row_begin, r0, std::min(block, row_end - r0), cols, patches, buf.get());
    }
  };
  std::vector<std::thread> workers;
  workers.reserve(static_cast<std::size_t>(threads - 1));
  for (int t = 1; t < threads; ++t) workers.emplace_back(work);
  work();
  for (std::thread& w : workers) w.join();
}

}  // namespace genscope::detail
