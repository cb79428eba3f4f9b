// The dense products behind merges, through OpenBLAS's sgemm, and the guard that keeps
// OpenBLAS's own thread pool out of genscope's parallel merge loop (docs/lora.md, "Threads").
#pragma once

#include <cstdint>

namespace genscope::detail {

/// out (m×n) += coef · a (m×k) · b (k×n), all row-major float32 (cblas_sgemm, beta = 1).
void matmul_add(const float* a, const float* b, float* out, std::int64_t m, std::int64_t k,
                std::int64_t n, float coef) noexcept;

/// out (m×n) += coef · aᵀ · b with a stored k×m and b k×n, row-major float32.
void matmul_add_at(const float* a, const float* b, float* out, std::int64_t m, std::int64_t k,
                   std::int64_t n, float coef) noexcept;

/// While alive, every BLAS call runs on its caller's thread: a threaded OpenBLAS (OpenMP or
/// pthreads build) is set to one thread and restored afterwards, with the guarding thread's
/// OpenMP thread count (process-wide for OpenBLAS, reference-counted across concurrent
/// guards); the serial build needs nothing.
class SingleThreadedBlas {
 public:
  SingleThreadedBlas();
  ~SingleThreadedBlas();
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;
};

/// "openmp", "pthreads" or "serial": how the loaded OpenBLAS runs its own threads.
const char* blas_threading() noexcept;
/// OpenBLAS's own thread count (what a call made outside a parallel region may use).
int blas_threads() noexcept;

}  // namespace genscope::detail
