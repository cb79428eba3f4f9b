// Architecture detection from parameter names (UNet, MMDiT, video DiT).
#include <algorithm>
#include <cctype>
#include <regex>

#include "genscope/validation.hpp"

namespace genscope {
namespace {

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

}  // namespace

std::string_view to_string(Architecture architecture) noexcept {
  switch (architecture) {
    case Architecture::kUNet: return "UNet";
    case Architecture::kMMDiT: return "MMDiT";
    case Architecture::kVideoDiT: return "video DiT";
    case Architecture::kUnknown: break;
  }
  return "unknown";
}

Architecture parse_architecture(std::string_view name) noexcept {
  std::string n;
  for (char c : name)
    if (std::isalnum(static_cast<unsigned char>(c)))
      n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n == "unet") return Architecture::kUNet;
  if (n == "mmdit") return Architecture::kMMDiT;
  if (n == "videodit" || n == "ditvideo") return Architecture::kVideoDiT;
  return Architecture::kUnknown;
}

ArchitectureGuess detect_architecture(std::span<const ParameterKey> keys) {
  // Wan: "blocks.<n>.self_attn" (original) or "blocks.<n>.attn1" (diffusers) at the top level
  // of the transformer, plus a patch_embedding (a Conv3d: 5-D weight when the shape is known).
  static const std::regex kVideoBlock(R"((^|\.)blocks\.\d+\.(self_attn|attn1)\.)");
  const ParameterKey* patch = nullptr;
  const ParameterKey* video_block = nullptr;
  const ParameterKey* joint = nullptr;
  const ParameterKey* transformer_block = nullptr;
  const ParameterKey* context_stream = nullptr;
  const ParameterKey* unet = nullptr;
  for (const auto& key : keys) {
    const std::string& n = key.name;
    if (patch == nullptr && contains(n, "patch_embedding")) patch = &key;
    if (video_block == nullptr && !contains(n, "transformer_blocks") &&
        std::regex_search(n, kVideoBlock))
      video_block = &key;
    if (joint == nullptr && (contains(n, "joint_blocks.") || contains(n, "double_blocks.")))
      joint = &key;
    if (contains(n, "transformer_blocks.")) {
      if (transformer_block == nullptr) transformer_block = &key;
      // The context (text) stream of a joint block: diffusers SD3/Flux "add_q_proj",
      // "ff_context"; Qwen-Image "txt_mlp"/"txt_mod".
      if (context_stream == nullptr &&
          (contains(n, "add_q_proj") || contains(n, "add_k_proj") || contains(n, "ff_context") ||
           contains(n, "txt_mlp") || contains(n, "txt_mod") || contains(n, "context_block")))
        context_stream = &key;
    }
    if (unet == nullptr && (contains(n, "input_blocks.") || contains(n, "down_blocks.")) &&
        !contains(n, "encoder.") && !contains(n, "decoder."))
      unet = &key;
  }
  ArchitectureGuess guess;
  if (patch != nullptr && video_block != nullptr) {
    const bool five_d = patch->shape.size() == 5;
    if (patch->shape.empty() || five_d || !contains(patch->name, "weight")) {
      guess.architecture = Architecture::kVideoDiT;
      guess.evidence = video_block->name + " + " + patch->name +
                       (five_d ? " (3-D patch embedding)" : "");
      return guess;
    }
  }
  if (joint != nullptr) {
    guess.architecture = Architecture::kMMDiT;
    guess.evidence = joint->name;
    return guess;
  }
  if (transformer_block != nullptr && context_stream != nullptr) {
    guess.architecture = Architecture::kMMDiT;
    guess.evidence = context_stream->name + " (context + x streams)";
    return guess;
  }
  if (unet != nullptr) {
    guess.architecture = Architecture::kUNet;
    guess.evidence = unet->name;
    return guess;
  }
  return guess;
}

ArchitectureGuess detect_architecture(std::span<const std::string> names) {
  std::vector<ParameterKey> keys;
  keys.reserve(names.size());
  for (const auto& n : names) keys.push_back({n, {}});
  return detect_architecture(std::span<const ParameterKey>(keys));
}

}  // namespace genscope
