// TensorView: a non-owning view of a tensor in host memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "genscope/dtype.hpp"

namespace genscope {

/// A non-owning view: pointer, shape, strides (in elements), dtype, device label.
/// Empty strides mean C-contiguous.
struct TensorView {
  const void* data = nullptr;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  ///< In elements; empty = contiguous.
  DType dtype = DType::kF32;
  std::string device = "cpu";  ///< Where the original tensor lives ("cpu", "cuda:0").

  /// Number of elements (1 for a scalar).
  std::int64_t numel() const noexcept {
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    return n;
  }
  /// numel * element size.
  std::int64_t nbytes() const noexcept {
    return numel() * static_cast<std::int64_t>(dtype_size(dtype));
  }
  /// True when strides are empty or equal the C-contiguous strides.
  bool is_contiguous() const noexcept;
};

}  // namespace genscope
