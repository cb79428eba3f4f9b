// Strided gather into a contiguous buffer: memcpy runs along the innermost contiguous axis.
#include "formats/strided_copy.hpp"

#include <cassert>
#include <cstdint>
#include <cstring>
#include <vector>

namespace genscope::detail {

void copy_to_contiguous(const TensorView& view, std::span<std::byte> out) {
  const std::size_t elem = dtype_size(view.dtype);
  const std::int64_t numel = view.numel();
  assert(out.size() == static_cast<std::size_t>(numel) * elem);
  if (numel == 0) return;
  const auto* src = static_cast<const std::byte*>(view.data);
  if (view.is_contiguous()) {
    std::memcpy(out.data(), src, out.size());
    return;
  }
  const std::size_t rank = view.shape.size();
  assert(view.strides.size() == rank && rank > 0);
  const std::int64_t inner = view.shape[rank - 1];
  const std::int64_t inner_stride = view.strides[rank - 1];
  std::vector<std::int64_t> index(rank, 0);
  std::byte* dst = out.data();
  const std::int64_t rows = numel / inner;
  for (std::int64_t row = 0; row < rows; ++row) {
    std::int64_t offset = 0;  // in elements, of index[0..rank-2]
    for (std::size_t d = 0; d + 1 < rank; ++d) offset += index[d] * view.strides[d];
    const std::byte* p = src + offset * static_cast<std::int64_t>(elem);
    if (inner_stride == 1) {
      std::memcpy(dst, p, static_cast<std::size_t>(inner) * elem);
      dst += static_cast<std::size_t>(inner) * elem;
    } else {
      for (std::int64_t k = 0; k < inner; ++k) {
        std::memcpy(dst, p + k * inner_stride * static_cast<std::int64_t>(elem), elem);
        dst += elem;
      }
    }
    for (std::size_t d = rank - 1; d-- > 0;) {  // odometer over the outer axes
      if (++index[d] < view.shape[d]) break;
      index[d] = 0;
    }
  }
}

}  // namespace genscope::detail
