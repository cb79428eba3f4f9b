// XXH3 compiled for AVX2 (called only when the CPU supports it; see hash.cpp).
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2"))), apply_to = function)
#else
#pragma GCC target("avx2")
#endif
#include <immintrin.h>
#define XXH_INLINE_ALL
#define XXH_VECTOR XXH_AVX2
#include <xxhash.h>

#include <cstddef>
#include <cstdint>

namespace genscope::detail {

std::uint64_t xxh3_64_avx2(const void* data, std::size_t bytes) noexcept {
  return XXH3_64bits(data, bytes);
}

void xxh3_update_avx2(void* state, const void* data, std::size_t bytes) noexcept {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state), data, bytes);
}

}  // namespace genscope::detail

#if defined(__clang__)
#pragma clang attribute pop
#endif
