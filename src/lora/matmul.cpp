// cblas_sgemm wrappers and the OpenBLAS thread guard (see matmul.hpp). Which OpenBLAS build
// is loaded is decided at run time by Debian's alternatives (libopenblas.so.0), so the guard
// asks the library (openblas_get_parallel) instead of assuming the one linked at build time.
// OpenBLAS 0.3.21's OpenMP build (common_thread.h num_cpu_avail) returns one thread when the
// caller's omp_get_max_threads() is 1 or it is inside an active OpenMP region, and otherwise
// resets its global count to the caller's omp_get_max_threads() on every call, so
// openblas_set_num_threads() does not hold there: the caller's OpenMP count is the knob.
#include "lora/matmul.hpp"

#include <cblas.h>
#include <omp.h>

#include <mutex>

namespace genscope::detail {
namespace {

constexpr int kOpenblasSerial = 0, kOpenblasPthreads = 1;

std::mutex guard_mutex;  // pthreads build: one process-wide count
int guard_depth = 0;     // live guards in this process
int saved_threads = 0;    // pthreads build: its thread count before the first guard

}  // namespace

void matmul_add(const float* a, const float* b, float* out, std::int64_t m, std::int64_t k,
                std::int64_t n, float coef) noexcept {
  if (m <= 0 || n <= 0 || k <= 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), coef, a, static_cast<blasint>(k), b, static_cast<blasint>(n), 1.0f, out,
              static_cast<blasint>(n));
}

void matmul_add_at(const float* a, const float* b, float* out, std::int64_t m, std::int64_t k,
                   std::int64_t n, float coef) noexcept {
  if (m <= 0 || n <= 0 || k <= 0) return;
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), coef, a, static_cast<blasint>(m), b, static_cast<blasint>(n), 1.0f, out,
              static_cast<blasint>(n));
}

SingleThreadedBlas::SingleThreadedBlas() {
  switch (openblas_get_parallel()) {
    case kOpenblasSerial: return;
    case kOpenblasPthreads: {
      const std::lock_guard<std::mutex> lock(guard_mutex);
      if (guard_depth++ == 0) {
        saved_threads = openblas_get_num_threads();
        if (saved_threads > 1) openblas_set_num_threads(1);
      }
      return;
    }
    default:  // OpenMP build: this thread's OpenMP count
      saved_omp_threads_ = omp_get_max_threads();
      omp_set_num_threads(1);
      return;
  }
}

SingleThreadedBlas::~SingleThreadedBlas() {
  switch (openblas_get_parallel()) {
    case kOpenblasSerial: return;
    case kOpenblasPthreads: {
      const std::lock_guard<std::mutex> lock(guard_mutex);
      if (--guard_depth == 0 && saved_threads > 1) openblas_set_num_threads(saved_threads);
      return;
    }
    default: omp_set_num_threads(saved_omp_threads_); return;
  }
}

const char* blas_threading() noexcept {
  switch (openblas_get_parallel()) {
    case kOpenblasSerial: return "serial";
    case kOpenblasPthreads: return "pthreads";
    default: return "openmp";
  }
}

int blas_threads() noexcept { return openblas_get_num_threads(); }

}  // namespace genscope::detail
