// View validation shared by stats, comparison and analysis.
#include "tensor/validate.hpp"

#include <string>

#include "genscope/error.hpp"

namespace genscope::detail {

void validate_view(const TensorView& view, std::string_view what) {
  const std::string name(what);
  for (std::size_t i = 0; i < view.shape.size(); ++i) {
    if (view.shape[i] < 0) {
      throw Error("InvalidShape", name + ": dimension " + std::to_string(i) + " is negative (" +
                                      std::to_string(view.shape[i]) + ")");
    }
  }
  if (!view.strides.empty() && view.strides.size() != view.shape.size()) {
    throw Error("InvalidStrides", name + ": " + std::to_string(view.strides.size()) +
                                      " strides for rank " + std::to_string(view.shape.size()));
  }
  if (view.data == nullptr && view.numel() > 0) {
    throw Error("NullData", name + ": null data pointer for " + std::to_string(view.numel()) +
                                " elements");
  }
}

}  // namespace genscope::detail
