// ComfyUI's LoRA key map (comfy/lora.py model_lora_keys_unet + model_lora_keys_clip, in
// that order) over a LoaderModel, as a stream of (LoRA name, patch target) in ComfyUI's
// insertion order. A name emitted twice keeps its first position and its last target, as
// assignments into ComfyUI's key_map dict do.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "lora/model_layout.hpp"

namespace genscope::detail {

/// A key_map value: a model key, or (model key, (0, offset, rows)), or (model key, None,
/// swap_scale_shift).
struct ComfyTarget {
  std::string_view model_key;
  std::int64_t offset = 0;
  std::int64_t rows = 0;  ///< 0: no offset.
  bool swap = false;
};

/// Receives one key_map assignment; `name` and `target.model_key` are valid during the call only.
using ComfyKeySink = std::function<void(std::string_view name, const ComfyTarget& target)>;

/// Emits every key_map assignment ComfyUI makes for `model`.
void comfy_key_map(const LoaderModel& model, const ComfyKeySink& emit);

/// The patch_dict key ComfyUI prints for a target ("key" or "('key', (0, o, r))").
std::string comfy_patch_key(const ComfyTarget& target);

}  // namespace genscope::detail
