// Element types of tensors, with the names used by safetensors, NumPy and PyTorch.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace genscope {

/// Tensor element types (the safetensors set).
enum class DType {
  kF64, kF32, kF16, kBF16, kF8E4M3, kF8E5M2,
  kI64, kI32, kI16, kI8, kU64, kU32, kU16, kU8, kBool,
};

/// Bytes per element.
std::size_t dtype_size(DType dtype) noexcept;
/// The safetensors name: "F32", "BF16", "F8_E4M3", "BOOL", ...
std::string_view dtype_name(DType dtype) noexcept;
/// Parses a safetensors dtype name; nullopt when unknown.
std::optional<DType> parse_dtype(std::string_view name) noexcept;
/// True for the floating-point types.
bool dtype_is_float(DType dtype) noexcept;

}  // namespace genscope
