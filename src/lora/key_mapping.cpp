// Mapping LoRA module names onto model keys, after ComfyUI's comfy/lora.py
// (model_lora_keys_unet / model_lora_keys_clip) and comfy/utils.py (unet_to_diffusers): the
// ldm <-> diffusers UNet translation is generated from the UNet's block structure, read from
// the base's own keys, never from a hand-written list.
#include <algorithm>
#include <array>
#include <set>
#include <string>

#include "genscope/lora.hpp"
#include "lora/key_map_builder.hpp"

namespace genscope {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool contains(std::string_view s, std::string_view p) { return s.find(p) != std::string_view::npos; }

LoraKeyTarget whole(std::string key) {
  LoraKeyTarget t;
  t.key = std::move(key);
  return t;
}

std::string dots_to_underscores(std::string s) {
  std::replace(s.begin(), s.end(), '.', '_');
  return s;
}

// Sorted views of the key list answering "is there a key with this prefix" in O(log n)
// without copying the keys.
class KeyIndex {
 public:
  explicit KeyIndex(const std::vector<std::string>& keys) : keys_(keys.begin(), keys.end()) {
    std::sort(keys_.begin(), keys_.end());
  }
  bool has(std::string_view key) const { return std::binary_search(keys_.begin(), keys_.end(), key); }
  bool has_prefix(std::string_view prefix) const {
    auto it = std::lower_bound(keys_.begin(), keys_.end(), prefix);
    return it != keys_.end() && starts_with(*it, prefix);
  }
  // Count of consecutive indices i with a key starting with base + i + ".".
  int count_blocks(const std::string& base) const {
    int i = 0;
    while (has_prefix(base + std::to_string(i) + ".")) ++i;
    return i;
  }

 private:
  std::vector<std::string_view> keys_;
};

constexpr std::array<std::string_view, 6> kUnetMapAttentions{
    "proj_in.weight", "proj_in.bias", "proj_out.weight", "proj_out.bias", "norm.weight", "norm.bias"};
constexpr std::array<std::string_view, 20> kTransformerBlocks{
    "norm1.weight",          "norm1.bias",           "norm2.weight",        "norm2.bias",
    "norm3.weight",          "norm3.bias",           "attn1.to_q.weight",   "attn1.to_k.weight",
    "attn1.to_v.weight",     "attn1.to_out.0.weight", "attn1.to_out.0.bias", "attn2.to_q.weight",
    "attn2.to_k.weight",     "attn2.to_v.weight",    "attn2.to_out.0.weight", "attn2.to_out.0.bias",
    "ff.net.0.proj.weight",  "ff.net.0.proj.bias",   "ff.net.2.weight",     "ff.net.2.bias"};
// ldm resnet name -> diffusers resnet name.
constexpr std::array<std::pair<std::string_view, std::string_view>, 12> kUnetMapResnet{{
    {"in_layers.2.weight", "conv1.weight"},        {"in_layers.2.bias", "conv1.bias"},
    {"emb_layers.1.weight", "time_emb_proj.weight"}, {"emb_layers.1.bias", "time_emb_proj.bias"},
    {"out_layers.3.weight", "conv2.weight"},       {"out_layers.3.bias", "conv2.bias"},
    {"skip_connection.weight", "conv_shortcut.weight"}, {"skip_connection.bias", "conv_shortcut.bias"},
    {"in_layers.0.weight", "norm1.weight"},        {"in_layers.0.bias", "norm1.bias"},
    {"out_layers.0.weight", "norm2.weight"},       {"out_layers.0.bias", "norm2.bias"},
}};
// ldm name -> diffusers name of the blocks outside the levels.
constexpr std::array<std::pair<std::string_view, std::string_view>, 20> kUnetMapBasic{{
    {"label_emb.0.0.weight", "class_embedding.linear_1.weight"},
    {"label_emb.0.0.bias", "class_embedding.linear_1.bias"},
    {"label_emb.0.2.weight", "class_embedding.linear_2.weight"},
    {"label_emb.0.2.bias", "class_embedding.linear_2.bias"},
    {"label_emb.0.0.weight", "add_embedding.linear_1.weight"},
    {"label_emb.0.0.bias", "add_embedding.linear_1.bias"},
    {"label_emb.0.2.weight", "add_embedding.linear_2.weight"},
    {"label_emb.0.2.bias", "add_embedding.linear_2.bias"},
    {"input_blocks.0.0.weight", "conv_in.weight"},
    {"input_blocks.0.0.bias", "conv_in.bias"},
    {"out.0.weight", "conv_norm_out.weight"},
    {"out.0.bias", "conv_norm_out.bias"},
    {"out.2.weight", "conv_out.weight"},
    {"out.2.bias", "conv_out.bias"},
    {"time_embed.0.weight", "time_embedding.linear_1.weight"},
    {"time_embed.0.bias", "time_embedding.linear_1.bias"},
    {"time_embed.2.weight", "time_embedding.linear_2.weight"},
    {"time_embed.2.bias", "time_embedding.linear_2.bias"},
    {"middle_block.1.norm.weight", "mid_block.attentions.0.norm.weight"},
    {"middle_block.1.norm.bias", "mid_block.attentions.0.norm.bias"},
}};

std::string fmt_idx(std::string_view a, int x) { return std::string(a) + std::to_string(x) + "."; }

// Finds the prefix in front of `marker` in any key.
std::optional<std::string> prefix_of(const std::vector<std::string>& keys, std::string_view marker) {
  for (const std::string& k : keys) {
    const auto p = k.find(marker);
    if (p != std::string::npos && (p == 0 || k[p - 1] == '.')) return k.substr(0, p);
  }
  return std::nullopt;
}

// The CLIP text towers of a checkpoint, in the two layouts found in files.
struct ClipTower {
  std::string prefix;  // up to and including "encoder.layers." or "resblocks."
  bool open_clip = false;
};

constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kLoraClipMap{{
    {"mlp.fc1", "mlp_fc1"}, {"mlp.fc2", "mlp_fc2"}, {"self_attn.k_proj", "self_attn_k_proj"},
    {"self_attn.q_proj", "self_attn_q_proj"}, {"self_attn.v_proj", "self_attn_v_proj"},
    {"self_attn.out_proj", "self_attn_out_proj"},
}};

// Where HF-named CLIP sublayer `c` of layer `b` lives in a tower.
std::optional<LoraKeyTarget> clip_target(const ClipTower& t, const KeyIndex& idx, int b,
                                         std::string_view c) {
  const std::string layer = t.prefix + std::to_string(b) + ".";
  if (!t.open_clip) {
    std::string key = layer + std::string(c) + ".weight";
    if (!idx.has(key)) return std::nullopt;
    return whole(key);
  }
  // OpenCLIP: q, k, v are row blocks of the fused in_proj_weight.
  LoraKeyTarget target;
  if (c == "self_attn.q_proj" || c == "self_attn.k_proj" || c == "self_attn.v_proj") {
    target = whole(layer + "attn.in_proj_weight");
    target.chunk = c == "self_attn.q_proj" ? 0 : c == "self_attn.k_proj" ? 1 : 2;
    target.chunks = 3;
  } else if (c == "self_attn.out_proj") {
    target = whole(layer + "attn.out_proj.weight");
  } else if (c == "mlp.fc1") {
    target = whole(layer + "mlp.c_fc.weight");
  } else {
    target = whole(layer + "mlp.c_proj.weight");
  }
  if (!idx.has(target.key)) return std::nullopt;
  return target;
}

void add_clip_keys(const std::vector<std::string>& keys, const KeyIndex& idx, const KeyMapSink& emit) {
  // Towers in ComfyUI's order of roles: the first is clip_l (or SD2's clip_h), the second
  // clip_g. A lone OpenCLIP-bigG tower (SDXL refiner) takes the clip_l names.
  std::vector<ClipTower> towers;
  for (std::string_view p : {"cond_stage_model.transformer.text_model.encoder.layers.",
                             "cond_stage_model.transformer.encoder.layers.",
                             "conditioner.embedders.0.transformer.text_model.encoder.layers.",
                             "text_encoder.text_model.encoder.layers.", "text_model.encoder.layers.",
                             "clip_l.transformer.text_model.encoder.layers."}) {
    if (idx.has_prefix(std::string(p) + "0.")) {
      towers.push_back({std::string(p), false});
      break;
    }
  }
  for (std::string_view p : {"cond_stage_model.model.transformer.resblocks."}) {
    if (towers.empty() && idx.has_prefix(std::string(p) + "0.")) towers.push_back({std::string(p), true});
  }
  const bool first_present = !towers.empty();
  for (std::string_view p : {"conditioner.embedders.1.model.transformer.resblocks.",
                             "conditioner.embedders.0.model.transformer.resblocks."}) {
    if (idx.has_prefix(std::string(p) + "0.")) {
      towers.push_back({std::string(p), true});
      break;
    }
  }
  for (std::string_view p : {"text_encoder_2.text_model.encoder.layers.",
                             "clip_g.transformer.text_model.encoder.layers."}) {
    if (idx.has_prefix(std::string(p) + "0.")) towers.push_back({std::string(p), false});
  }
  (void)keys;
  for (std::size_t ti = 0; ti < towers.size(); ++ti) {
    const bool as_second = ti > 0 && first_present;
    for (int b = 0; b < 48; ++b) {
      for (const auto& [c, lora_c] : kLoraClipMap) {
        const auto target = clip_target(towers[ti], idx, b, c);
        if (!target) continue;
        const std::string layer = "_text_model_encoder_layers_" + std::to_string(b) + "_" + std::string(lora_c);
        const std::string hf = ".text_model.encoder.layers." + std::to_string(b) + "." + std::string(c);
        if (as_second) {
          emit("lora_te2" + layer, *target);
          emit("text_encoder_2" + hf, *target);
        } else {
          emit("lora_te" + layer, *target);
          emit("lora_te1" + layer, *target);
          emit("text_encoder" + hf, *target);
        }
      }
    }
  }
  // T5 (SD3/Flux trainers: lora_te3_).
  for (const std::string& k : keys) {
    for (std::string_view p : {"text_encoders.t5xxl.transformer.", "t5xxl.transformer."}) {
      if (starts_with(k, p) && k.ends_with(".weight")) {
        const std::string rest = k.substr(p.size(), k.size() - p.size() - 7);
        emit("lora_te3_" + dots_to_underscores(rest), whole(k));
      }
    }
  }
}

}  // namespace

std::optional<UnetConfig> unet_config_from_keys(const std::vector<std::string>& model_keys) {
  const KeyIndex idx(model_keys);
  UnetConfig config;
  if (auto prefix = prefix_of(model_keys, "input_blocks.0.0.weight")) {
    const std::string p = *prefix;
    int in_level = 0;
    for (int n = 1; idx.has_prefix(fmt_idx(p + "input_blocks.", n)); ++n) {
      const std::string b = fmt_idx(p + "input_blocks.", n);
      if (idx.has_prefix(b + "0.op.")) {  // downsampler closes a level
        config.num_res_blocks.push_back(in_level);
        in_level = 0;
        continue;
      }
      ++in_level;
      config.transformer_depth.push_back(idx.count_blocks(b + "1.transformer_blocks."));
    }
    config.num_res_blocks.push_back(in_level);
    for (int m = 0; idx.has_prefix(fmt_idx(p + "output_blocks.", m)); ++m) {
      config.transformer_depth_output.push_back(
          idx.count_blocks(fmt_idx(p + "output_blocks.", m) + "1.transformer_blocks."));
    }
    config.transformer_depth_middle = idx.count_blocks(p + "middle_block.1.transformer_blocks.");
    return config;
  }
  if (auto prefix = prefix_of(model_keys, "down_blocks.0.resnets.0.")) {
    const std::string p = *prefix;
    for (int x = 0; idx.has_prefix(fmt_idx(p + "down_blocks.", x)); ++x) {
      const std::string b = fmt_idx(p + "down_blocks.", x);
      const int n = idx.count_blocks(b + "resnets.");
      config.num_res_blocks.push_back(n);
      for (int i = 0; i < n; ++i) {
        config.transformer_depth.push_back(
            idx.count_blocks(fmt_idx(b + "attentions.", i) + "transformer_blocks."));
      }
    }
    for (int x = 0; idx.has_prefix(fmt_idx(p + "up_blocks.", x)); ++x) {
      const std::string b = fmt_idx(p + "up_blocks.", x);
      const int n = idx.count_blocks(b + "resnets.");
      for (int i = 0; i < n; ++i) {
        config.transformer_depth_output.push_back(
            idx.count_blocks(fmt_idx(b + "attentions.", i) + "transformer_blocks."));
      }
    }
    config.transformer_depth_middle = idx.count_blocks(p + "mid_block.attentions.0.transformer_blocks.");
    return config;
  }
  return std::nullopt;
}

std::map<std::string, std::string> unet_to_diffusers(const UnetConfig& config) {
  std::map<std::string, std::string> map;  // diffusers -> ldm
  const int num_blocks = static_cast<int>(config.num_res_blocks.size());
  std::size_t depth_i = 0;
  const auto add_transformer = [&map](const std::string& d, const std::string& l, int depth) {
    for (std::string_view b : kUnetMapAttentions) map[d + std::string(b)] = l + std::string(b);
    for (int t = 0; t < depth; ++t) {
      for (std::string_view b : kTransformerBlocks) {
        map[d + "transformer_blocks." + std::to_string(t) + "." + std::string(b)] =
            l + "transformer_blocks." + std::to_string(t) + "." + std::string(b);
      }
    }
  };
  for (int x = 0; x < num_blocks; ++x) {
    int n = 1 + (config.num_res_blocks[x] + 1) * x;
    for (int i = 0; i < config.num_res_blocks[x]; ++i) {
      for (const auto& [l, d] : kUnetMapResnet) {
        map["down_blocks." + std::to_string(x) + ".resnets." + std::to_string(i) + "." + std::string(d)] =
            "input_blocks." + std::to_string(n) + ".0." + std::string(l);
      }
      const int depth = depth_i < config.transformer_depth.size() ? config.transformer_depth[depth_i++] : 0;
      if (depth > 0) {
        add_transformer("down_blocks." + std::to_string(x) + ".attentions." + std::to_string(i) + ".",
                        "input_blocks." + std::to_string(n) + ".1.", depth);
      }
      ++n;
    }
    for (std::string_view k : {"weight", "bias"}) {
      map["down_blocks." + std::to_string(x) + ".downsamplers.0.conv." + std::string(k)] =
          "input_blocks." + std::to_string(n) + ".0.op." + std::string(k);
    }
  }
  add_transformer("mid_block.attentions.0.", "middle_block.1.", config.transformer_depth_middle);
  for (int i = 0; i < 2; ++i) {
    for (const auto& [l, d] : kUnetMapResnet) {
      map["mid_block.resnets." + std::to_string(i) + "." + std::string(d)] =
          "middle_block." + std::to_string(i * 2) + "." + std::string(l);
    }
  }
  std::size_t out_i = 0;
  for (int x = 0; x < num_blocks; ++x) {
    const int res = config.num_res_blocks[num_blocks - 1 - x];
    int n = (res + 1) * x;
    const int l = res + 1;
    for (int i = 0; i < l; ++i) {
      int c = 0;
      for (const auto& [lk, d] : kUnetMapResnet) {
        map["up_blocks." + std::to_string(x) + ".resnets." + std::to_string(i) + "." + std::string(d)] =
            "output_blocks." + std::to_string(n) + ".0." + std::string(lk);
      }
      ++c;
      const int depth = out_i < config.transformer_depth_output.size() ? config.transformer_depth_output[out_i++] : 0;
      if (depth > 0) {
        ++c;
        add_transformer("up_blocks." + std::to_string(x) + ".attentions." + std::to_string(i) + ".",
                        "output_blocks." + std::to_string(n) + ".1.", depth);
      }
      if (i == l - 1) {
        for (std::string_view k : {"weight", "bias"}) {
          map["up_blocks." + std::to_string(x) + ".upsamplers.0.conv." + std::string(k)] =
              "output_blocks." + std::to_string(n) + "." + std::to_string(c) + ".conv." + std::string(k);
        }
      }
      ++n;
    }
  }
  for (const auto& [l, d] : kUnetMapBasic) map[std::string(d)] = std::string(l);
  return map;
}

ModelArch detect_model_arch(const std::vector<std::string>& keys) {
  const KeyIndex idx(keys);
  bool input_blocks = false, label_emb = false, open_clip_sd = false, sd1_clip = false;
  bool down_blocks = false, add_embedding = false, te2 = false;
  for (const std::string& k : keys) {
    if (contains(k, "joint_blocks.")) return ModelArch::kSD3;
    if (contains(k, "double_blocks.")) return ModelArch::kFlux;
    if (contains(k, "img_mlp.") || contains(k, "txt_mlp.") || contains(k, "img_mod.")) return ModelArch::kQwenImage;
    if (contains(k, "blocks.0.cross_attn.") && contains(k, "blocks.")) return ModelArch::kWan;
    input_blocks = input_blocks || contains(k, "input_blocks.");
    label_emb = label_emb || contains(k, "label_emb.");
    open_clip_sd = open_clip_sd || starts_with(k, "cond_stage_model.model.");
    sd1_clip = sd1_clip || starts_with(k, "cond_stage_model.transformer.");
    down_blocks = down_blocks || contains(k, "down_blocks.");
    add_embedding = add_embedding || contains(k, "add_embedding.");
    te2 = te2 || starts_with(k, "text_encoder_2.") || starts_with(k, "conditioner.embedders.1.");
  }
  if (input_blocks) {
    if (label_emb || te2) return ModelArch::kSDXL;
    return open_clip_sd ? ModelArch::kSD2 : ModelArch::kSD1;
  }
  if (down_blocks) return add_embedding || te2 ? ModelArch::kSDXL : ModelArch::kSD1;
  (void)sd1_clip;
  (void)idx;
  return ModelArch::kUnknown;
}

ModelArch detect_lora_arch(const std::vector<std::string>& names, std::string* evidence) {
  std::string why;
  ModelArch arch = ModelArch::kUnknown;
  const auto set = [&](ModelArch a, std::string reason) {
    if (arch == ModelArch::kUnknown) {
      arch = a;
      why = std::move(reason);
    }
  };
  int max_te_layer = -1;
  for (const std::string& n : names) {
    if (contains(n, "joint_blocks")) set(ModelArch::kSD3, "module '" + n + "' (MMDiT joint_blocks)");
    if (contains(n, "double_blocks") || contains(n, "single_blocks") ||
        contains(n, "single_transformer_blocks")) {
      set(ModelArch::kFlux, "module '" + n + "' (Flux double/single blocks)");
    }
    if (contains(n, "img_mlp") || contains(n, "txt_mlp") || contains(n, "img_mod")) {
      set(ModelArch::kQwenImage, "module '" + n + "' (Qwen-Image img/txt streams)");
    }
    if ((contains(n, "cross_attn") || contains(n, "self_attn")) && contains(n, "blocks") &&
        !contains(n, "text_model")) {
      set(ModelArch::kWan, "module '" + n + "' (Wan DiT blocks)");
    }
    if (starts_with(n, "lora_te2_") || starts_with(n, "text_encoder_2.")) {
      set(ModelArch::kSDXL, "module '" + n + "' (second text encoder)");
    }
    if (contains(n, "input_blocks_4_1_transformer_blocks_1") || contains(n, "transformer_blocks_2_") ||
        contains(n, "transformer_blocks.2.") || starts_with(n, "lora_unet_input_blocks_7_1") ||
        contains(n, "up_blocks_0_attentions") || contains(n, "up_blocks.0.attentions")) {
      set(ModelArch::kSDXL, "module '" + n + "' (SDXL UNet block layout)");
    }
    if (contains(n, "down_blocks_0_attentions") || contains(n, "down_blocks.0.attentions") ||
        contains(n, "up_blocks_3_attentions") || contains(n, "up_blocks.3.attentions") ||
        contains(n, "input_blocks_1_1_") || contains(n, "down_blocks_3_")) {
      set(ModelArch::kSD1, "module '" + n + "' (SD1.x/SD2.x UNet block layout)");
    }
    const auto p = n.find("encoder_layers_");
    if ((starts_with(n, "lora_te_") || starts_with(n, "text_encoder.")) && p != std::string::npos) {
      max_te_layer = std::max(max_te_layer, std::atoi(n.c_str() + p + 15));
    }
  }
  if (arch == ModelArch::kSD1 && max_te_layer >= 12) {
    arch = ModelArch::kSD2;
    why += "; text encoder has " + std::to_string(max_te_layer + 1) + "+ layers (OpenCLIP-H)";
  }
  if (evidence != nullptr) *evidence = why;
  return arch;
}

std::pair<std::int64_t, std::int64_t> LoraKeyTarget::row_window(std::int64_t weight_rows) const noexcept {
  if (rows > 0) return {row_offset, rows};
  const std::int64_t n = chunks > 0 ? weight_rows / chunks : weight_rows;
  return {n * chunk, n};
}

std::map<std::string, LoraKeyTarget> lora_key_map(const SafetensorsFile& base, LoraLoader) {
  std::vector<std::string> keys;
  for (const auto& e : base.entries()) keys.push_back(e.name);
  return lora_key_map(keys);
}

std::map<std::string, LoraKeyTarget> lora_key_map(const std::vector<std::string>& model_keys) {
  std::map<std::string, LoraKeyTarget> map;
  build_lora_key_map(model_keys, [&map](std::string name, const LoraKeyTarget& target) {
    map[std::move(name)] = target;
  });
  return map;
}

void build_lora_key_map(const std::vector<std::string>& model_keys, const KeyMapSink& emit) {
  const KeyIndex idx(model_keys);
  const ModelArch arch = detect_model_arch(model_keys);
  // Generic names from the base's own UNet/transformer keys.
  std::string unet_prefix;
  for (std::string_view p : {"model.diffusion_model.", "diffusion_model.", "unet.", "transformer."}) {
    if (idx.has_prefix(std::string(p))) {
      unet_prefix = p;
      break;
    }
  }
  const bool transformer = arch == ModelArch::kSD3 || arch == ModelArch::kFlux ||
                           arch == ModelArch::kWan || arch == ModelArch::kQwenImage;
  if (!unet_prefix.empty()) {
    for (const std::string& k : model_keys) {
      if (!starts_with(k, unet_prefix) || !k.ends_with(".weight")) continue;
      const std::string rest = k.substr(unet_prefix.size(), k.size() - unet_prefix.size() - 7);
      emit("lora_unet_" + dots_to_underscores(rest), whole(k));
      emit(k.substr(0, k.size() - 7), whole(k));
      emit("diffusion_model." + rest, whole(k));
      if (transformer || unet_prefix == "transformer.") {
        emit("transformer." + rest, whole(k));
        emit("lora_transformer_" + dots_to_underscores(rest), whole(k));
        emit("lycoris_" + dots_to_underscores(rest), whole(k));
      }
      if (unet_prefix == "unet.") emit("lycoris_" + dots_to_underscores(rest), whole(k));
    }
  }
  // UNet models: the other naming of every weight, generated from the block structure.
  if (auto config = unet_config_from_keys(model_keys)) {
    const auto d2l = unet_to_diffusers(*config);
    const bool ldm_base = idx.has_prefix(unet_prefix + "input_blocks.");
    for (const auto& [d, l] : d2l) {
      if (!d.ends_with(".weight")) continue;
      const std::string d_mod = d.substr(0, d.size() - 7);
      const std::string l_mod = l.substr(0, l.size() - 7);
      // The model key this weight has in the base's own naming.
      const std::string model_key = unet_prefix + (ldm_base ? l : d);
      const LoraKeyTarget target = whole(model_key);
      emit("lora_unet_" + dots_to_underscores(d_mod), target);
      emit("lora_unet_" + dots_to_underscores(l_mod), target);
      emit("lycoris_" + dots_to_underscores(d_mod), target);
      std::string proc = d_mod;
      for (std::size_t pos = proc.find(".to_"); pos != std::string::npos; pos = proc.find(".to_", pos + 14)) {
        proc.replace(pos, 4, ".processor.to_");
      }
      if (proc.ends_with(".to_out.0")) proc.resize(proc.size() - 2);
      emit(proc, target);
      emit("unet." + proc, target);
      emit("unet." + d_mod, target);
    }
  }
  add_clip_keys(model_keys, idx, emit);
}

}  // namespace genscope
