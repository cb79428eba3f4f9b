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

/// While alive, the BLAS calls of the thread that holds it run on that thread alone.
/// OpenBLAS's OpenMP build sizes each call by the *calling thread's* OpenMP thread count
/// (omp_get_max_threads), so the guard sets that thread's count to 1 and restores it (thread
/// local: other threads keep theirs); its pthreads build has one process-wide count, set to
/// 1 while any guard is alive (reference-counted across threads) and restored after; the
/// serial build needs nothing. Every worker thread that calls BLAS holds its own guard.
class SingleThreadedBlas {
 public:
  SingleThreadedBlas();
  ~SingleThreadedBlas();
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

 private:
  int saved_omp_threads_ = 0;  ///< OpenMP build: this thread's count before the guard
};

/// "openmp", "pthreads" or "serial": how the loaded OpenBLAS runs its own threads.
const char* blas_threading() noexcept;
/// OpenBLAS's own thread count (the OpenMP build follows each caller's OpenMP count).
int blas_threads() noexcept;

}  // namespace genscope::detail
