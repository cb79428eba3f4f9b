// The weight delta of a LoRA module, computed from its factors' shapes only (no data):
// shared by the analysis (LoraModule::delta_shape) and the merge checks.
#pragma once

#include <cstdint>
#include <vector>

#include "genscope/lora.hpp"

namespace genscope::detail {

/// What ComfyUI's load_lora patches a module's weight with: later kinds replace earlier ones
/// (adapter, then w_norm, then diff, then set_weight), as in its load order.
enum class WeightPatchKind { kNone, kAdapter, kWNorm, kDiff, kSet };

/// The kind of the module's weight patch (kNone: it patches no weight, e.g. diff_b alone).
WeightPatchKind weight_patch_kind(const LoraModule& module) noexcept;

/// The role of the module's bias patch ("diff_b", "b_norm") or nullptr when there is none.
const char* bias_patch_role(const LoraModule& module) noexcept;

/// True when the module carries a kohya/LyCORIS `.dora_scale` (the DoRA magnitude ComfyUI
/// reads; PEFT's lora_magnitude_vector is not read by ComfyUI's load_lora).
bool has_comfy_dora(const LoraModule& module) noexcept;

/// The shape of the module's weight patch as ComfyUI forms it (empty when its tensors are
/// missing or malformed; validate() says why).
std::vector<std::int64_t> module_delta_shape(const SafetensorsFile& file, const LoraModule& module);

}  // namespace genscope::detail
