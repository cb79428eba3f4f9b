// XXH3 dispatch: picks the AVX-512, AVX2 or baseline build of xxhash at run time (the
// Debian header is compiled for the build's baseline, SSE2, unless told otherwise).
#include "tensor/hash.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace genscope::detail {

std::uint64_t xxh3_64_avx2(const void* data, std::size_t bytes) noexcept;
std::uint64_t xxh3_64_avx512(const void* data, std::size_t bytes) noexcept;
void xxh3_update_avx2(void* state, const void* data, std::size_t bytes) noexcept;
void xxh3_update_avx512(void* state, const void* data, std::size_t bytes) noexcept;

namespace {

enum class Isa { kBaseline, kAvx2, kAvx512 };

Isa detect() noexcept {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) return Isa::kAvx512;
  if (__builtin_cpu_supports("avx2")) return Isa::kAvx2;
  return Isa::kBaseline;
}

Isa isa() noexcept {
  static const Isa value = detect();
  return value;
}

}  // namespace

std::uint64_t xxh3_64(const void* data, std::size_t bytes) noexcept {
  switch (isa()) {
    case Isa::kAvx512: return xxh3_64_avx512(data, bytes);
    case Isa::kAvx2: return xxh3_64_avx2(data, bytes);
    case Isa::kBaseline: break;
  }
  return XXH3_64bits(data, bytes);
}

struct Xxh3Stream::State {
  XXH3_state_t s;
};

Xxh3Stream::Xxh3Stream() : state_(std::make_unique<State>()) { XXH3_64bits_reset(&state_->s); }
Xxh3Stream::~Xxh3Stream() = default;

void Xxh3Stream::update(const void* data, std::size_t bytes) noexcept {
  switch (isa()) {
    case Isa::kAvx512: return xxh3_update_avx512(&state_->s, data, bytes);
    case Isa::kAvx2: return xxh3_update_avx2(&state_->s, data, bytes);
    case Isa::kBaseline: break;
  }
  XXH3_64bits_update(&state_->s, data, bytes);
}

std::uint64_t Xxh3Stream::digest() const noexcept { return XXH3_64bits_digest(&state_->s); }

}  // namespace genscope::detail
