// cblas_sgemm wrappers and the OpenBLAS thread guard (see matmul.hpp). Which OpenBLAS build
// is loaded is decided at run time by Debian's alternatives (libopenblas.so.0), so the guard
// asks the library (openblas_get_parallel) instead of assuming the one linked at build time.
// The OpenMP build would run single-threaded inside an *active* OpenMP region by itself, but a
// region whose team OpenMP shrank to one thread is not active (omp_in_parallel() is false) and
// OpenBLAS would then start threads that its own nested, one-thread region cannot run: a
// deadlock. So both threaded builds are set to one thread explicitly.
#include "lora/matmul.hpp"

#include <cblas.h>
#include <omp.h>

#include <mutex>

namespace genscope::detail {
namespace {

constexpr int kOpenblasSerial = 0, kOpenblasPthreads = 1;

std::mutex guard_mutex;
int guard_depth = 0;      // live guards in this process
int saved_threads = 0;      // OpenBLAS's thread count before the first guard
int saved_omp_threads = 0;  // the guarding thread's OpenMP nthreads ICV before it

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
  if (openblas_get_parallel() == kOpenblasSerial) return;
  const std::lock_guard<std::mutex> lock(guard_mutex);
  if (guard_depth++ == 0) {
    saved_threads = openblas_get_num_threads();
    saved_omp_threads = omp_get_max_threads();  // the OpenMP build sets the caller's ICV too
    if (saved_threads > 1) openblas_set_num_threads(1);
  }
}

SingleThreadedBlas::~SingleThreadedBlas() {
  if (openblas_get_parallel() == kOpenblasSerial) return;
  const std::lock_guard<std::mutex> lock(guard_mutex);
  if (--guard_depth == 0 && saved_threads > 1) {
    openblas_set_num_threads(saved_threads);
    omp_set_num_threads(saved_omp_threads);
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
