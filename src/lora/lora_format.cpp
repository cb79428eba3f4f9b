// Per-module format detection: which tensor suffixes make up a module, in which naming
// family, aimed at which network. Works on key lists only (no tensor data).
#include <algorithm>
#include <array>
#include <map>
#include <string>
#include <unordered_map>

#include "genscope/lora.hpp"

namespace genscope {
namespace {

struct SuffixRule {
  std::string_view suffix;
  std::string_view role;
  LoraNaming naming;
};

// Longest suffixes of a family first; a key matches the first rule whose suffix it ends with.
constexpr std::array<SuffixRule, 40> kRules{{
    {".lora_up.weight", "up", LoraNaming::kKohya},
    {".lora_down.weight", "down", LoraNaming::kKohya},
    {".lora_mid.weight", "mid", LoraNaming::kKohya},
    {".dora_scale", "dora_scale", LoraNaming::kKohya},
    {".lora_A.default.weight", "down", LoraNaming::kPeft},
    {".lora_B.default.weight", "up", LoraNaming::kPeft},
    {".lora_A.weight", "down", LoraNaming::kPeft},
    {".lora_B.weight", "up", LoraNaming::kPeft},
    {".lora_magnitude_vector.default.weight", "dora_scale", LoraNaming::kPeft},
    {".lora_magnitude_vector.weight", "dora_scale", LoraNaming::kPeft},
    {".lora_magnitude_vector", "dora_scale", LoraNaming::kPeft},
    {".lora_A", "down", LoraNaming::kPeft},  // Mochi (ComfyUI weight_adapter/lora.py)
    {".lora_B", "up", LoraNaming::kPeft},
    {".lora_linear_layer.down.weight", "down", LoraNaming::kDiffusersOld},
    {".lora_linear_layer.up.weight", "up", LoraNaming::kDiffusersOld},
    {".lora.down.weight", "down", LoraNaming::kDiffusersOld},
    {".lora.up.weight", "up", LoraNaming::kDiffusersOld},
    {"_lora.down.weight", "down", LoraNaming::kDiffusersOld},
    {"_lora.up.weight", "up", LoraNaming::kDiffusersOld},
    {".hada_w1_a", "hada_w1_a", LoraNaming::kLycoris},
    {".hada_w1_b", "hada_w1_b", LoraNaming::kLycoris},
    {".hada_w2_a", "hada_w2_a", LoraNaming::kLycoris},
    {".hada_w2_b", "hada_w2_b", LoraNaming::kLycoris},
    {".hada_t1", "hada_t1", LoraNaming::kLycoris},
    {".hada_t2", "hada_t2", LoraNaming::kLycoris},
    {".lokr_w1_a", "lokr_w1_a", LoraNaming::kLycoris},
    {".lokr_w1_b", "lokr_w1_b", LoraNaming::kLycoris},
    {".lokr_w2_a", "lokr_w2_a", LoraNaming::kLycoris},
    {".lokr_w2_b", "lokr_w2_b", LoraNaming::kLycoris},
    {".lokr_w1", "lokr_w1", LoraNaming::kLycoris},
    {".lokr_w2", "lokr_w2", LoraNaming::kLycoris},
    {".lokr_t2", "lokr_t2", LoraNaming::kLycoris},
    {".diff_b", "diff_b", LoraNaming::kLycoris},
    {".diff", "diff", LoraNaming::kLycoris},
    {".set_weight", "set_weight", LoraNaming::kLycoris},
    {".w_norm", "w_norm", LoraNaming::kLycoris},
    {".b_norm", "b_norm", LoraNaming::kLycoris},
    {".reshape_weight", "reshape_weight", LoraNaming::kKohya},  // BFL control LoRAs
    {".alpha", "alpha", LoraNaming::kKohya},
    {".scale", "scale_unused", LoraNaming::kKohya},
}};

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool contains(std::string_view s, std::string_view p) { return s.find(p) != std::string_view::npos; }

LoraTarget target_of(std::string_view name) {
  if (starts_with(name, "lora_te1_") || starts_with(name, "text_encoder.") ||
      starts_with(name, "lora_te_") || starts_with(name, "te1.")) {
    return LoraTarget::kTextEncoder;
  }
  if (starts_with(name, "lora_te2_") || starts_with(name, "text_encoder_2.")) {
    return LoraTarget::kTextEncoder2;
  }
  if (starts_with(name, "lora_te3_") || starts_with(name, "text_encoder_3.") ||
      starts_with(name, "lora_t5_")) {
    return LoraTarget::kT5;
  }
  if (starts_with(name, "transformer.") || starts_with(name, "lora_transformer_")) {
    return LoraTarget::kTransformer;
  }
  if (starts_with(name, "lora_unet_") || starts_with(name, "unet.") ||
      starts_with(name, "diffusion_model.") || starts_with(name, "model.diffusion_model.") ||
      starts_with(name, "lycoris_")) {
    const bool unet_blocks = contains(name, "down_blocks") || contains(name, "up_blocks") ||
                             contains(name, "input_blocks") || contains(name, "output_blocks") ||
                             contains(name, "mid_block") || contains(name, "middle_block");
    // Transformer families (Flux double_blocks, SD3 joint_blocks, Wan blocks) have no
    // UNet levels in their names.
    return !unet_blocks && contains(name, "blocks") ? LoraTarget::kTransformer : LoraTarget::kUnet;
  }
  return LoraTarget::kUnknown;
}

}  // namespace

std::string_view lora_module_type_name(LoraModuleType type) noexcept {
  switch (type) {
    case LoraModuleType::kLora: return "lora";
    case LoraModuleType::kLoha: return "loha";
    case LoraModuleType::kLokr: return "lokr";
    case LoraModuleType::kDiff: return "diff";
    case LoraModuleType::kSetWeight: return "set_weight";
    case LoraModuleType::kNorm: return "norm";
  }
  return "lora";
}

std::string_view lora_naming_name(LoraNaming naming) noexcept {
  switch (naming) {
    case LoraNaming::kKohya: return "kohya";
    case LoraNaming::kPeft: return "peft";
    case LoraNaming::kDiffusersOld: return "diffusers";
    case LoraNaming::kLycoris: return "lycoris";
  }
  return "kohya";
}

std::string_view lora_target_name(LoraTarget target) noexcept {
  switch (target) {
    case LoraTarget::kUnet: return "unet";
    case LoraTarget::kTextEncoder: return "text_encoder";
    case LoraTarget::kTextEncoder2: return "text_encoder_2";
    case LoraTarget::kT5: return "t5";
    case LoraTarget::kTransformer: return "transformer";
    case LoraTarget::kUnknown: return "unknown";
  }
  return "unknown";
}

std::string_view lora_loader_name(LoraLoader loader) noexcept {
  return loader == LoraLoader::kDiffusers ? "diffusers" : "comfyui";
}

std::optional<LoraLoader> lora_loader_from_name(std::string_view name) noexcept {
  if (name == "comfyui") return LoraLoader::kComfyUI;
  if (name == "diffusers") return LoraLoader::kDiffusers;
  return std::nullopt;
}

std::string_view model_arch_name(ModelArch arch) noexcept {
  switch (arch) {
    case ModelArch::kUnknown: return "unknown";
    case ModelArch::kSD1: return "SD1.x";
    case ModelArch::kSD2: return "SD2.x";
    case ModelArch::kSDXL: return "SDXL";
    case ModelArch::kSD3: return "SD3";
    case ModelArch::kFlux: return "Flux";
    case ModelArch::kWan: return "Wan";
    case ModelArch::kQwenImage: return "Qwen-Image";
  }
  return "unknown";
}

std::vector<LoraModule> group_lora_keys(const std::vector<std::string>& keys,
                                        std::vector<std::string>* unknown_keys) {
  std::vector<LoraModule> out;
  std::unordered_map<std::string_view, std::size_t> index;  // module name (a prefix of its keys) -> out
  index.reserve(keys.size());
  for (const std::string& key : keys) {
    const SuffixRule* rule = nullptr;
    for (const SuffixRule& r : kRules) {
      if (key.size() > r.suffix.size() && key.ends_with(r.suffix)) {
        rule = &r;
        break;
      }
    }
    if (rule == nullptr || rule->role == "scale_unused") {
      if (unknown_keys != nullptr) unknown_keys->push_back(key);
      continue;
    }
    const std::string_view name = std::string_view(key).substr(0, key.size() - rule->suffix.size());
    const auto [it, inserted] = index.try_emplace(name, out.size());
    if (inserted) {
      out.emplace_back();
      out.back().name = name;
    }
    LoraModule& m = out[it->second];
    m.tensors[std::string(rule->role)] = key;
    if (rule->role == "up" || rule->role == "down") m.naming = rule->naming;
    if (rule->naming == LoraNaming::kPeft && rule->role == "dora_scale") m.naming = rule->naming;
  }
  std::sort(out.begin(), out.end(), [](const LoraModule& a, const LoraModule& b) { return a.name < b.name; });
  for (LoraModule& m : out) {
    const auto has = [&m](std::string_view role) { return m.tensors.count(std::string(role)) > 0; };
    bool hada = false, lokr = false;
    for (const auto& [role, key] : m.tensors) {
      hada = hada || starts_with(role, "hada_");
      lokr = lokr || starts_with(role, "lokr_");
    }
    if (hada) {
      m.type = LoraModuleType::kLoha;
      m.naming = LoraNaming::kLycoris;
    } else if (lokr) {
      m.type = LoraModuleType::kLokr;
      m.naming = LoraNaming::kLycoris;
    } else if (has("up") || has("down") || has("mid")) {
      m.type = LoraModuleType::kLora;
    } else if (has("diff") || has("diff_b")) {
      m.type = LoraModuleType::kDiff;
    } else if (has("set_weight")) {
      m.type = LoraModuleType::kSetWeight;
    } else if (has("w_norm") || has("b_norm")) {
      m.type = LoraModuleType::kNorm;
    } else {
      m.type = LoraModuleType::kLora;  // alpha/dora_scale alone: a LoRA missing both halves
    }
    m.dora = has("dora_scale");
    m.target = target_of(m.name);
  }
  return out;
}

}  // namespace genscope
