// Element conversion between stored dtypes and float32, used by streaming diffs and merges.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "genscope/dtype.hpp"
#include "genscope/safetensors.hpp"

namespace genscope::detail {

/// IEEE half -> float.
float f16_to_f32(std::uint16_t bits) noexcept;
/// float -> IEEE half, round to nearest even.
std::uint16_t f32_to_f16(float value) noexcept;
/// bfloat16 -> float.
inline float bf16_to_f32(std::uint16_t bits) noexcept {
  std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
/// float -> bfloat16, round to nearest even (NaN stays NaN).
std::uint16_t f32_to_bf16(float value) noexcept;

/// True for the dtypes convert_to_f32 understands (floats and integers; not FP8).
bool convertible(DType dtype) noexcept;
/// Converts `count` elements starting at element `first` of `src` (dtype `dtype`) to float.
void convert_to_f32(const std::byte* src, DType dtype, std::size_t first, std::size_t count,
                    float* dst) noexcept;
/// Converts float to `dtype` (float dtypes only) into `dst`.
void convert_from_f32(const float* src, std::size_t count, DType dtype, std::byte* dst) noexcept;
/// A whole tensor as float32; throws Error("UnsupportedDType") naming it when unconvertible.
std::vector<float> tensor_to_f32(const SafetensorsFile& file, const SafetensorsEntry& entry);
/// The single value of a scalar (or 1-element) tensor as double.
double scalar_value(const SafetensorsFile& file, const SafetensorsEntry& entry);

}  // namespace genscope::detail
