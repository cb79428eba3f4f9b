// The LoRA key map as a stream of (LoRA module name, target) pairs, so callers that only
// need a few names (fit_lora) can filter instead of storing every naming of every key.
// Later pairs override earlier ones, as assignments into ComfyUI's key_map dict do.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "genscope/lora.hpp"

namespace genscope {

/// Receives one (module name, target) pair.
using KeyMapSink = std::function<void(std::string, const LoraKeyTarget&)>;

/// Emits every pair lora_key_map() would contain, in ComfyUI's order.
void build_lora_key_map(const std::vector<std::string>& model_keys, const KeyMapSink& emit);

}  // namespace genscope
