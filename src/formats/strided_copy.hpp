// Copying a (possibly strided) TensorView into a C-contiguous buffer.
#pragma once

#include <cstddef>
#include <span>

#include "genscope/tensor_view.hpp"

namespace genscope::detail {

/// Copies the elements of `view` in C order into `out` (exactly view.nbytes() bytes).
/// Strides are in elements and may be zero or negative.
void copy_to_contiguous(const TensorView& view, std::span<std::byte> out);

}  // namespace genscope::detail
