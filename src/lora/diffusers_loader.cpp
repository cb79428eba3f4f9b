// diffusers' load_lora_weights (work in progress).
#include "lora/loader_fit.hpp"

namespace genscope::detail {

LoraFit fit_diffusers(const LoraFile& lora, const LoraNames& names, const LoaderModel& model) {
  LoraFit fit;
  fit.loader = LoraLoader::kDiffusers;
  fit.base_arch = model.arch;
  (void)lora;
  set_loaded(fit, names, {});
  return fit;
}

}  // namespace genscope::detail
