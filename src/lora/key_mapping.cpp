// Public key-mapping entry points: the UNet structure read from a checkpoint's keys, the
// model family of a checkpoint and of a LoRA, and the loaders' name -> target maps. The
// rules themselves live in model_layout.cpp (what the loader's model is), family_maps.cpp
// (original <-> diffusers names) and comfy_key_map.cpp (ComfyUI's key_map).
#include <algorithm>
#include <array>
#include <string>

#include "genscope/lora.hpp"
#include "lora/comfy_key_map.hpp"
#include "lora/family_maps.hpp"
#include "lora/model_layout.hpp"

namespace genscope {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool contains(std::string_view s, std::string_view p) { return s.find(p) != std::string_view::npos; }

// "blocks" used as a DiT block list (Wan's blocks.N), not part of transformer_blocks,
// double_blocks, input_blocks, ...
bool plain_blocks(std::string_view n) {
  static constexpr std::array<std::string_view, 8> kJoined{"transformer", "double", "single", "joint",
                                                           "input",       "output", "down",   "up"};
  for (std::size_t pos = n.find("blocks"); pos != std::string_view::npos; pos = n.find("blocks", pos + 6)) {
    if (pos + 6 >= n.size() || (n[pos + 6] != '.' && n[pos + 6] != '_')) continue;
    if (pos == 0 || n[pos - 1] == '.') return true;
    if (n[pos - 1] != '_') continue;
    const std::size_t start = n.find_last_of("._", pos - 2);
    const std::string_view word = n.substr(start == std::string_view::npos ? 0 : start + 1,
                                           pos - 1 - (start == std::string_view::npos ? 0 : start + 1));
    if (std::find(kJoined.begin(), kJoined.end(), word) == kJoined.end()) return true;
  }
  return false;
}

bool unet_levels(std::string_view n) {
  return contains(n, "input_blocks") || contains(n, "output_blocks") || contains(n, "down_blocks") ||
         contains(n, "up_blocks") || contains(n, "mid_block") || contains(n, "middle_block");
}

}  // namespace

std::optional<UnetConfig> unet_config_from_keys(const std::vector<std::string>& model_keys) {
  return detail::unet_config_of(detail::BaseFile(model_keys));
}

std::map<std::string, std::string> unet_to_diffusers(const UnetConfig& config) {
  std::map<std::string, std::string> map;  // diffusers -> ldm
  for (const detail::FamilyPair& p : detail::unet_pairs(config)) map[p.diffusers] = p.original;
  return map;
}

ModelArch detect_model_arch(const std::vector<std::string>& keys) {
  return detail::detect_family(detail::BaseFile(keys), nullptr, nullptr);
}

ModelArch detect_lora_arch(const std::vector<std::string>& names, std::string* evidence) {
  // The most specific evidence wins, whatever the name order.
  enum Rank { kSD3, kFlux, kQwen, kWan, kXL, kSD1, kRanks };
  std::array<std::string, kRanks> first;
  const auto note = [&](Rank r, const std::string& n) {
    if (first[r].empty()) first[r] = n;
  };
  int max_te_layer = -1;
  std::string te2, joint;  // a second CLIP text encoder; MMDiT-style joint attention names
  for (const std::string& n : names) {
    if (te2.empty() && (starts_with(n, "lora_te2_text_model") || starts_with(n, "text_encoder_2.text_model"))) te2 = n;
    if (joint.empty() && (contains(n, "add_q_proj") || contains(n, "add_k_proj") || contains(n, "add_v_proj") ||
                          contains(n, "to_add_out") || contains(n, "ff_context"))) {
      joint = n;
    }
    if (contains(n, "joint_blocks") || contains(n, "context_block") || contains(n, "x_block")) note(kSD3, n);
    if (contains(n, "double_blocks") || contains(n, "single_blocks") || contains(n, "single_transformer_blocks")) {
      note(kFlux, n);
    }
    if (contains(n, "transformer_blocks") && (contains(n, "img_mlp") || contains(n, "txt_mlp") ||
                                              contains(n, "img_mod") || contains(n, "txt_mod"))) {
      note(kQwen, n);
    }
    if (plain_blocks(n) && !contains(n, "text_model") &&
        (contains(n, "self_attn") || contains(n, "cross_attn") || contains(n, "ffn") || contains(n, "attn1") ||
         contains(n, "attn2"))) {
      note(kWan, n);
    }
    if (unet_levels(n) &&
        (contains(n, "input_blocks_4_1_transformer_blocks_1") || contains(n, "transformer_blocks_2_") ||
         contains(n, "transformer_blocks.2.") || starts_with(n, "lora_unet_input_blocks_7_1") ||
         contains(n, "up_blocks_0_attentions") || contains(n, "up_blocks.0.attentions"))) {
      note(kXL, n);
    }
    if (contains(n, "down_blocks_0_attentions") || contains(n, "down_blocks.0.attentions") ||
        contains(n, "up_blocks_3_attentions") || contains(n, "up_blocks.3.attentions") ||
        contains(n, "input_blocks_1_1_") || contains(n, "input_blocks.1.1.") || contains(n, "down_blocks_3_")) {
      note(kSD1, n);
    }
    const auto p = n.find("encoder_layers_");
    if ((starts_with(n, "lora_te_") || starts_with(n, "text_encoder.")) && p != std::string::npos) {
      max_te_layer = std::max(max_te_layer, std::atoi(n.c_str() + p + 15));
    }
  }
  // A second CLIP tower: SD3 when the LoRA also has joint attention (Flux's second encoder is
  // T5, Qwen-Image has none), else SDXL.
  if (!te2.empty()) {
    if (!joint.empty()) {
      note(kSD3, joint);
    } else {
      note(kXL, te2);
    }
  }
  static constexpr std::array<std::pair<ModelArch, std::string_view>, kRanks> kWhat{{
      {ModelArch::kSD3, "MMDiT joint blocks, or joint attention with a second CLIP text encoder"},
      {ModelArch::kFlux, "Flux double/single blocks"},
      {ModelArch::kQwenImage, "Qwen-Image img/txt streams"},
      {ModelArch::kWan, "Wan DiT blocks"},
      {ModelArch::kSDXL, "SDXL UNet block layout or second text encoder"},
      {ModelArch::kSD1, "SD1.x/SD2.x UNet block layout"},
  }};
  for (int r = 0; r < kRanks; ++r) {
    if (first[r].empty()) continue;
    ModelArch arch = kWhat[r].first;
    std::string why = "module '" + first[r] + "' (" + std::string(kWhat[r].second) + ")";
    if (arch == ModelArch::kSD1 && max_te_layer >= 12) {
      arch = ModelArch::kSD2;
      why += "; text encoder has " + std::to_string(max_te_layer + 1) + "+ layers (OpenCLIP-H)";
    }
    if (evidence != nullptr) *evidence = why;
    return arch;
  }
  if (evidence != nullptr) evidence->clear();
  return ModelArch::kUnknown;
}

namespace {

// A model tensor as a target in the file (first piece, with a loader window composed in).
std::optional<LoraKeyTarget> file_target(const detail::LoaderModel& model, const detail::ModelTensor& mt,
                                         std::int64_t offset, std::int64_t rows) {
  const detail::TensorView t = model.view(mt);
  if (t.pieces.empty()) return std::nullopt;
  LoraKeyTarget target = t.pieces.front().where;
  if (rows > 0) {
    std::int64_t base_row = target.row_offset;
    if (target.rows == 0 && target.chunks > 1 && !t.shape.empty()) base_row = target.chunk * t.shape[0];
    target.chunk = 0;
    target.chunks = 1;
    target.row_offset = base_row + offset;
    target.rows = rows;
  }
  return target;
}

std::map<std::string, LoraKeyTarget> key_map_of(const detail::BaseFile& tensors, LoraLoader loader) {
  std::map<std::string, LoraKeyTarget> map;
  if (loader == LoraLoader::kComfyUI) {
    const detail::LoaderModel model = detail::comfy_model(tensors);
    detail::comfy_key_map(model, [&](std::string_view name, const detail::ComfyTarget& t) {
      const detail::ModelTensor* mt = model.find(t.model_key);
      if (mt == nullptr) return;
      if (auto target = file_target(model, *mt, t.offset, t.rows)) map[std::string(name)] = std::move(*target);
    });
    return map;
  }
  // diffusers: PEFT module paths of the pipeline's components.
  const detail::LoaderModel model = detail::diffusers_model(tensors);
  for (const auto* keys : {&model.diffusion_keys, &model.text_keys}) {
    for (const std::string_view key : *keys) {
      if (!key.ends_with(".weight")) continue;
      if (auto target = file_target(model, *model.find(key), 0, 0)) map[std::string(key.substr(0, key.size() - 7))] = std::move(*target);
    }
  }
  return map;
}

}  // namespace

std::pair<std::int64_t, std::int64_t> LoraKeyTarget::row_window(std::int64_t weight_rows) const noexcept {
  if (rows > 0) return {row_offset, rows};
  const std::int64_t n = chunks > 0 ? weight_rows / chunks : weight_rows;
  return {n * chunk, n};
}

std::map<std::string, LoraKeyTarget> lora_key_map(const std::vector<std::string>& model_keys) {
  return key_map_of(detail::BaseFile(model_keys), LoraLoader::kComfyUI);
}

std::map<std::string, LoraKeyTarget> lora_key_map(const SafetensorsFile& base, LoraLoader loader) {
  return key_map_of(detail::BaseFile(base), loader);
}

}  // namespace genscope
