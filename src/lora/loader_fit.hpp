// The two loader profiles behind fit_lora, and what they share: turning "module patches
// model tensor T (rows window W, bias B)" into LoraKeyTargets on the base file, with the
// shape check, the not-loaded / missing-from-file / unsupported bookkeeping.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "genscope/lora.hpp"
#include "lora/model_layout.hpp"

namespace genscope::detail {

/// All tensor names of a LoRA file, hashed.
class LoraNames {
 public:
  explicit LoraNames(const LoraFile& lora);
  bool has(std::string_view name) const { return names_.count(name) != 0; }
  /// The stored view of `name` (outlives `name`); empty when absent.
  std::string_view get(std::string_view name) const {
    const auto it = names_.find(name);
    return it == names_.end() ? std::string_view{} : *it;
  }
  const std::vector<std::string_view>& sorted() const noexcept { return sorted_; }

 private:
  std::unordered_set<std::string_view> names_;
  std::vector<std::string_view> sorted_;
};

/// A resolved patch: `module` adds its delta to model tensor `tensor` (rows [offset, offset +
/// rows) of it when rows > 0), its bias delta to `bias` (nullptr: none).
struct ModelPatch {
  const LoraModule* module = nullptr;
  TensorView tensor;                   ///< The weight (or, for a bias-only patch, the bias).
  std::string patch_key;  ///< How the loader names it (NOT LOADED / missing lines).
  std::int64_t offset = 0;
  std::int64_t rows = 0;
  bool swap = false;
  bool weight = true;                  ///< The module patches the weight (not only the bias).
  std::int64_t delta_row = 0;          ///< Only rows [delta_row, delta_row + delta_rows) of the
  std::int64_t delta_rows = 0;         ///< module's delta land here (0: all of it).
  std::optional<TensorView> bias;      ///< Bias tensor patched by diff_b / b_norm.
};

/// Adds `patch` to fit.matched (one entry per file tensor it lands on), checking the delta
/// shape; records what a merge cannot reproduce in fit.merge_unsupported.
void add_matched(LoraFit& fit, const ModelPatch& patch);

/// Sets tensors_loaded / lora_keys_not_loaded from the consumed tensor names.
void set_loaded(LoraFit& fit, const LoraNames& names, const std::unordered_set<std::string_view>& consumed);

/// ComfyUI's LoraLoader (comfy/sd.py load_lora_for_models) on this LoRA and ComfyUI's model
/// of the base (comfy_model). Fills the not-loaded lists and failures, and with `targets`
/// matched, shape mismatches and what a merge cannot reproduce; not the verdict.
LoraFit fit_comfyui(const LoraFile& lora, const LoraNames& names, const LoaderModel& model, bool targets = true);
/// diffusers' load_lora_weights on this LoRA and diffusers' model of the base (same fields).
LoraFit fit_diffusers(const LoraFile& lora, const LoraNames& names, const LoaderModel& model, bool targets = true);

}  // namespace genscope::detail
