// The reference pipeline's side of genscope's ModelPatcher (genscope/model_patcher.hpp, the
// one patcher of the project): parameter tables of its weight maps, and ComfyUI's
// patch_model, which merges a patcher's pending patches into the weights when the model is
// loaded for sampling.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "genscope/model_patcher.hpp"
#include "networks.hpp"

namespace genscope::detail {

/// A weight map as a model snapshot (XXH3-64 content hashes of the values when `hash`).
ModelSnapshot snapshot_weights(const Weights& weights, std::string class_name, bool hash);

/// ComfyUI patch_model: every pending patch of `patcher` merged into `weights` in float32
/// (ModelPatcher::patch_weight), each tensor kept on its device and dtype; returns the keys.
std::vector<std::string> patch_model(const ModelPatcher& patcher, Weights& weights);

/// A patcher's identity, placement and patch state (no parameter table).
nlohmann::json patcher_state(const ModelPatcher& patcher);

}  // namespace genscope::detail
