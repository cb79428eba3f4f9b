// Checks that a TensorView is usable before any kernel touches its memory.
#pragma once

#include <string_view>

#include "genscope/tensor_view.hpp"

namespace genscope::detail {

/// Throws genscope::Error ("InvalidShape", "InvalidStrides", "NullData") naming `what`.
void validate_view(const TensorView& view, std::string_view what);

}  // namespace genscope::detail
