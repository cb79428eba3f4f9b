// Shared by the format fuzz targets: reads every byte a TensorView covers (via its strides),
// so ASan reports any view that points outside the parsed buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "genscope/tensor_view.hpp"

namespace genscope::fuzz {

/// XOR of every byte of every element of `view`, walked with its strides.
inline std::uint8_t touch_view(const TensorView& view) {
  const std::int64_t numel = view.numel();
  if (numel == 0) return 0;
  const std::size_t elem = dtype_size(view.dtype);
  const auto* base = static_cast<const std::uint8_t*>(view.data);
  std::vector<std::int64_t> strides = view.strides;
  if (strides.empty()) {  // C-contiguous
    strides.assign(view.shape.size(), 1);
    for (std::size_t d = view.shape.size(); d-- > 1;) strides[d - 1] = strides[d] * view.shape[d];
  }
  std::vector<std::int64_t> index(view.shape.size(), 0);
  std::uint8_t acc = 0;
  for (std::int64_t n = 0; n < numel; ++n) {
    std::int64_t offset = 0;
    for (std::size_t d = 0; d < index.size(); ++d) offset += index[d] * strides[d];
    for (std::size_t b = 0; b < elem; ++b)
      acc ^= base[offset * static_cast<std::int64_t>(elem) + b];
    for (std::size_t d = index.size(); d-- > 0;) {
      if (++index[d] < view.shape[d]) break;
      index[d] = 0;
    }
  }
  return acc;
}

}  // namespace genscope::fuzz
