// Scalar element decoding (f16, bf16, fp8 tables, integers) and the strided gatherer.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "genscope/tensor_view.hpp"

namespace genscope::detail {

/// Elements per processing block (stack buffers, per-block moments, gather runs).
inline constexpr std::int64_t kBlockElements = 4096;
/// Minimum bytes handed to one worker thread.
inline constexpr std::int64_t kMinChunkBytes = std::int64_t{4} << 20;

/// IEEE binary16 bits to float.
float half_to_float(std::uint16_t h) noexcept;
/// bfloat16 bits (upper half of an f32) to float.
inline float bf16_to_float(std::uint16_t h) noexcept {
  const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
/// The 256-entry decode table of an fp8 dtype (kF8E4M3 = OCP e4m3fn, kF8E5M2).
const std::array<float, 256>& fp8_table(DType dtype) noexcept;

/// Element `i` of a contiguous array of `dtype`, as double.
double element_to_double(const void* data, std::int64_t i, DType dtype) noexcept;

/// Converts `count` contiguous elements of any dtype to double (for the f64 kernels).
void to_double(const void* data, std::int64_t count, DType dtype, double* out) noexcept;

/// Visits the elements of a (possibly strided) view in logical C order, copying them into a
/// contiguous buffer of up to kBlockElements elements at a time.
class Gatherer {
 public:
  explicit Gatherer(const TensorView& view);
  /// Copies the next elements into `out` (room for kBlockElements elements) and returns how
  /// many were copied; 0 at the end.
  std::int64_t next(void* out);

 private:
  const std::uint8_t* base_;
  std::size_t elem_bytes_;
  std::vector<std::int64_t> shape_;
  std::vector<std::int64_t> strides_;
  std::vector<std::int64_t> index_;
  std::int64_t remaining_;
  std::int64_t offset_ = 0;  // element offset of index_ from base_
};

/// Strides in elements: the view's own or the C-contiguous ones.
std::vector<std::int64_t> effective_strides(const TensorView& view);

/// Number of worker threads for `bytes` of data given the requested count (0 = hardware).
unsigned plan_threads(std::int64_t bytes, unsigned requested) noexcept;

}  // namespace genscope::detail
