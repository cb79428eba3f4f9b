// XXH3-64 with run-time dispatch (SSE2 baseline, AVX2, AVX-512), one-shot and streaming.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace genscope::detail {

/// XXH3_64bits(data, bytes) with the widest instruction set the CPU supports.
std::uint64_t xxh3_64(const void* data, std::size_t bytes) noexcept;

/// Streaming XXH3-64 (same result as xxh3_64 over the concatenated input).
class Xxh3Stream {
 public:
  Xxh3Stream();
  ~Xxh3Stream();
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;
  /// Appends bytes.
  void update(const void* data, std::size_t bytes) noexcept;
  /// The hash of everything appended so far.
  std::uint64_t digest() const noexcept;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace genscope::detail
