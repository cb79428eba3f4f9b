// TensorView helpers.
#include "genscope/tensor_view.hpp"

namespace genscope {

bool TensorView::is_contiguous() const noexcept {
  if (strides.empty()) return true;
  if (strides.size() != shape.size()) return false;
  std::int64_t expected = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

}  // namespace genscope
