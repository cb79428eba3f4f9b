// XXH3 compiled for AVX512 (called only when the CPU supports it; see hash.cpp).
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx2"))), apply_to = function)
#else
#pragma GCC target("avx512f,avx512bw,avx2")
#endif
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // false positives inside GCC 12
#pragma GCC diagnostic ignored "-Wuninitialized"        // AVX-512 intrinsics
#endif
#include <immintrin.h>
#define XXH_INLINE_ALL
#define XXH_VECTOR XXH_AVX512
#include <xxhash.h>

#include <cstddef>
#include <cstdint>

namespace genscope::detail {

std::uint64_t xxh3_64_avx512(const void* data, std::size_t bytes) noexcept {
  return XXH3_64bits(data, bytes);
}

void xxh3_update_avx512(void* state, const void* data, std::size_t bytes) noexcept {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state), data, bytes);
}

}  // namespace genscope::detail

#if defined(__clang__)
#pragma clang attribute pop
#endif
