// The loader's model over a base file (model_layout.hpp). The translations follow what each
// loader does to a checkpoint before building its model:
//  - ComfyUI (Comfy-Org/ComfyUI@09708eae709a992a5684bed3595ce4d07e705b4e): comfy/sd.py
//    loads "model.diffusion_model." (checkpoints) or bare keys (diffusion models) as
//    "diffusion_model."; comfy/model_detection.py converts diffusers-named UNets
//    (unet_to_diffusers), SD3 (mmdit_to_diffusers) and Flux (flux_to_diffusers, q/k/v
//    concatenated into qkv); comfy/supported_models.py process_clip_state_dict renames the
//    text encoders to clip_l / clip_g / clip_h / t5xxl, converting OpenCLIP towers with
//    comfy/utils.py clip_text_transformers_convert (in_proj split into q/k/v,
//    text_projection transposed); comfy/clip_model.py CLIPTextModel initialises a
//    text_projection to the identity when the file has none.
//  - diffusers (huggingface/diffusers@019c4962f0bbfc90cd1ac86ced68fb8676e5a5f7):
//    from_single_file converts the same checkpoints to module paths of the pipeline
//    components unet / transformer / text_encoder / text_encoder_2 / text_encoder_3.
// Wan's diffusers layout is not converted by ComfyUI's model_detection at that revision; the
// ComfyUI profile reads it through the same rename table diffusers uses.
#include "lora/model_layout.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "lora/family_maps.hpp"

namespace genscope::detail {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

using NameIndex = BaseFile;

// Prefixes of a checkpoint's other components: never the diffusion model.
constexpr std::array<std::string_view, 12> kOtherComponents{
    "first_stage_model.", "cond_stage_model.", "conditioner.", "text_encoders.", "text_encoder.",
    "text_encoder_2.", "text_encoder_3.", "vae.", "model_ema.", "clip_l.", "clip_g.", "t5xxl."};

bool other_component(std::string_view name) {
  for (std::string_view p : kOtherComponents) {
    if (starts_with(name, p)) return true;
  }
  return false;
}

struct Family {
  ModelArch arch = ModelArch::kUnknown;
  std::string prefix;
  bool diffusers = false;
};

// The family the keys under `p` form, or nullopt.
std::optional<Family> family_under(const NameIndex& idx, const std::string& p) {
  const auto has = [&](std::string_view rel) { return idx.has_prefix(p + std::string(rel)); };
  Family f;
  f.prefix = p;
  if (has("joint_blocks.0.")) {
    f.arch = ModelArch::kSD3;
  } else if (has("double_blocks.0.") || has("single_blocks.0.")) {
    f.arch = ModelArch::kFlux;
  } else if (has("transformer_blocks.0.img_mlp.") || has("transformer_blocks.0.img_mod.")) {
    f.arch = ModelArch::kQwenImage;
  } else if (has("single_transformer_blocks.0.") || (has("x_embedder.weight") && has("transformer_blocks.0.attn.add_q_proj."))) {
    f.arch = ModelArch::kFlux;
    f.diffusers = true;
  } else if (has("transformer_blocks.0.attn.add_q_proj.") && has("pos_embed.")) {
    f.arch = ModelArch::kSD3;
    f.diffusers = true;
  } else if (has("blocks.0.self_attn.") || has("blocks.0.cross_attn.")) {
    f.arch = ModelArch::kWan;
  } else if (has("blocks.0.attn1.") && (has("condition_embedder.") || has("patch_embedding."))) {
    f.arch = ModelArch::kWan;
    f.diffusers = true;
  } else if (has("input_blocks.0.0.") || has("middle_block.")) {
    f.arch = ModelArch::kSD1;  // refined by the caller
  } else if (has("down_blocks.0.") && (has("conv_in.") || has("mid_block."))) {
    f.arch = ModelArch::kSD1;
    f.diffusers = true;
  } else {
    return std::nullopt;
  }
  return f;
}

// Any key of the file without a prefix of another component.
bool has_bare_keys(const std::vector<BaseTensor>& tensors) {
  return std::any_of(tensors.begin(), tensors.end(), [](const BaseTensor& t) { return !other_component(t.name); });
}

Family find_family(const std::vector<BaseTensor>& tensors, const NameIndex& idx) {
  for (std::string p : {"model.diffusion_model.", "diffusion_model.", "unet.", "transformer.", "model."}) {
    if (auto f = family_under(idx, p)) return *f;
  }
  if (has_bare_keys(tensors)) {
    if (auto f = family_under(idx, "")) return *f;
  }
  return {};
}

// UNet sub-family from the text encoders / label embedding present.
ModelArch unet_family(const NameIndex& idx, const Family& f, const std::vector<BaseTensor>& tensors) {
  if (idx.has_prefix(f.prefix + (f.diffusers ? "add_embedding." : "label_emb.")) ||
      idx.has_prefix("conditioner.embedders.1.") || idx.has_prefix("text_encoder_2.") ||
      idx.has_prefix("conditioner.embedders.0.model.")) {
    return ModelArch::kSDXL;
  }
  if (idx.has_prefix("cond_stage_model.model.")) return ModelArch::kSD2;
  // Diffusers SD2: OpenCLIP-H in HF layout has 23 layers, CLIP-L 12.
  int layers = 0;
  for (const BaseTensor& t : tensors) {
    if (!starts_with(t.name, "text_encoder.text_model.encoder.layers.")) continue;
    layers = std::max(layers, std::atoi(std::string(t.name.substr(39, 4)).c_str()) + 1);
  }
  return layers > 12 ? ModelArch::kSD2 : ModelArch::kSD1;
}

std::vector<std::int64_t> shape_of(const std::vector<BaseTensor>& tensors, long i) {
  if (i < 0) return {};
  const auto s = tensors[static_cast<std::size_t>(i)].shape;
  return {s.begin(), s.end()};
}

// Builds a LoaderModel key by key.
class Builder {
 public:
  Builder(LoaderModel& model, const NameIndex& idx) : m_(model), idx_(idx) {}

  // Model key `key` is the whole file tensor `file_key` (optionally transposed).
  void whole(std::vector<std::string_view>& order, std::string_view key, std::string_view file_key,
             bool transpose = false) {
    const long i = idx_.find(file_key);
    if (i < 0) return;
    ModelTensor& t = add(order, key);
    t.file = static_cast<std::int32_t>(i);
    t.transpose = transpose;
  }
  // Model key `key` is file tensor number `i`.
  void whole_at(std::vector<std::string_view>& order, std::string_view key, std::size_t i) {
    ModelTensor& t = add(order, key);
    t.file = static_cast<std::int32_t>(i);
  }
  // Model key `key` is rows [offset, offset + rows) of file tensor `file_key`, or chunk
  // `chunk` of `chunks` equal row blocks when rows is 0.
  void window(std::vector<std::string_view>& order, std::string_view key, std::string_view file_key,
              std::int64_t offset, std::int64_t rows, int chunk = 0, int chunks = 1) {
    const long i = idx_.find(file_key);
    if (i < 0) return;
    ModelTensor& t = add(order, key);
    t.file = static_cast<std::int32_t>(i);
    t.row_offset = offset;
    t.rows = rows;
    t.chunk = static_cast<std::int16_t>(chunk);
    t.chunks = static_cast<std::int16_t>(chunks);
  }
  // Model key `key` holds, from row `model_row`, the whole file tensor `file_key` (a fused
  // weight the file stores split).
  void piece(std::vector<std::string_view>& order, std::string_view key, std::string_view file_key,
             std::int64_t model_row) {
    const long i = idx_.find(file_key);
    if (i < 0) return;
    ModelTensor& t = add(order, key);
    if (t.split < 0) {
      t.split = static_cast<std::int32_t>(m_.splits.size());
      m_.splits.emplace_back();
    }
    m_.splits[static_cast<std::size_t>(t.split)].emplace_back(static_cast<std::int32_t>(i), model_row);
  }
  // A key the loader's model has but the file lacks.
  void missing(std::vector<std::string_view>& order, std::string_view key, std::string_view would_be) {
    if (m_.tensors.count(key) != 0) return;
    ModelTensor& t = add(order, key);
    t.kind = ModelTensor::Kind::kMissing;
    t.would_be = m_.arena.intern(would_be);
  }
  // A key the loader initialises to the identity of `width` (the file lacks it).
  void identity(std::vector<std::string_view>& order, std::string_view key, std::string_view would_be,
                std::int64_t width) {
    if (m_.tensors.count(key) != 0) return;
    ModelTensor& t = add(order, key);
    t.kind = ModelTensor::Kind::kIdentity;
    t.would_be = m_.arena.intern(would_be);
    t.rows = width;
  }
  void mark_swapped(std::string_view key) {
    if (auto it = m_.tensors.find(key); it != m_.tensors.end()) it->second.swapped = true;
  }

 private:
  ModelTensor& add(std::vector<std::string_view>& order, std::string_view key) {
    if (auto it = m_.tensors.find(key); it != m_.tensors.end()) return it->second;
    const std::string_view stored = m_.arena.intern(key);
    order.push_back(stored);
    return m_.tensors.emplace(stored, ModelTensor{}).first->second;
  }
  LoaderModel& m_;
  const NameIndex& idx_;
};

// --- the diffusion model ---------------------------------------------------------------

// Keys of the diffusion model in the file (relative to the family prefix), file order.
std::vector<std::pair<std::string_view, long>> diffusion_names(const std::vector<BaseTensor>& tensors, const Family& f) {
  std::vector<std::pair<std::string_view, long>> out;
  out.reserve(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::string_view n = tensors[i].name;
    if (!starts_with(n, f.prefix)) continue;
    if (f.prefix.empty() && other_component(n)) continue;
    out.emplace_back(n.substr(f.prefix.size()), static_cast<long>(i));
  }
  return out;
}

// The UNet structure from the file (ComfyUI's model_detection counts the same blocks).
std::optional<UnetConfig> read_unet(const NameIndex& idx, const std::string& p, bool diffusers) {
  UnetConfig config;
  const auto block = [](const std::string& a, int x) { return a + std::to_string(x) + "."; };
  if (!diffusers) {
    if (!idx.has_prefix(p + "input_blocks.0.0.")) return std::nullopt;
    int in_level = 0;
    for (int n = 1; idx.has_prefix(block(p + "input_blocks.", n)); ++n) {
      const std::string b = block(p + "input_blocks.", n);
      if (idx.has_prefix(b + "0.op.")) {  // a downsampler closes a level
        config.num_res_blocks.push_back(in_level);
        in_level = 0;
        continue;
      }
      ++in_level;
      config.transformer_depth.push_back(idx.count_blocks(b + "1.transformer_blocks."));
    }
    config.num_res_blocks.push_back(in_level);
    for (int m = 0; idx.has_prefix(block(p + "output_blocks.", m)); ++m) {
      config.transformer_depth_output.push_back(idx.count_blocks(block(p + "output_blocks.", m) + "1.transformer_blocks."));
    }
    config.transformer_depth_middle = idx.count_blocks(p + "middle_block.1.transformer_blocks.");
    return config;
  }
  if (!idx.has_prefix(p + "down_blocks.0.resnets.0.")) return std::nullopt;
  for (int x = 0; idx.has_prefix(block(p + "down_blocks.", x)); ++x) {
    const std::string b = block(p + "down_blocks.", x);
    const int n = idx.count_blocks(b + "resnets.");
    config.num_res_blocks.push_back(n);
    for (int i = 0; i < n; ++i) {
      config.transformer_depth.push_back(idx.count_blocks(block(b + "attentions.", i) + "transformer_blocks."));
    }
  }
  for (int x = 0; idx.has_prefix(block(p + "up_blocks.", x)); ++x) {
    const std::string b = block(p + "up_blocks.", x);
    const int n = idx.count_blocks(b + "resnets.");
    for (int i = 0; i < n; ++i) {
      config.transformer_depth_output.push_back(idx.count_blocks(block(b + "attentions.", i) + "transformer_blocks."));
    }
  }
  config.transformer_depth_middle = idx.count_blocks(p + "mid_block.attentions.0.transformer_blocks.");
  return config;
}

// The family's original <-> diffusers pairs, from the structure the file shows.
std::vector<FamilyPair> family_pairs(const LoaderModel& m) {
  switch (m.arch) {
    case ModelArch::kSD1:
    case ModelArch::kSD2:
    case ModelArch::kSDXL:
      return m.unet ? unet_pairs(*m.unet) : std::vector<FamilyPair>{};
    case ModelArch::kSD3: return mmdit_pairs(m.mmdit_depth, m.mmdit_blocks);
    case ModelArch::kFlux: return flux_pairs(m.flux_double, m.flux_single, m.flux_hidden);
    case ModelArch::kWan: return wan_pairs(m.wan_blocks);
    default: return {};
  }
}

// Reads the structure parameters (SD3 depth, Flux widths) from the file.
void read_structure(LoaderModel& m, const std::vector<BaseTensor>& tensors, const NameIndex& idx, const Family& f) {
  const std::string& p = f.prefix;
  if (m.arch == ModelArch::kSD3) {
    const std::string x = p + (f.diffusers ? "pos_embed.proj.weight" : "x_embedder.proj.weight");
    const auto s = shape_of(tensors, idx.find(x));
    m.mmdit_depth = s.empty() ? 0 : static_cast<int>(s[0] / 64);
    m.mmdit_blocks = idx.count_blocks(p + (f.diffusers ? "transformer_blocks." : "joint_blocks."));
  } else if (m.arch == ModelArch::kFlux) {
    const auto s = shape_of(tensors, idx.find(p + (f.diffusers ? "x_embedder.weight" : "img_in.weight")));
    m.flux_hidden = s.empty() ? 0 : s[0];
    m.flux_double = idx.count_blocks(p + (f.diffusers ? "transformer_blocks." : "double_blocks."));
    m.flux_single = idx.count_blocks(p + (f.diffusers ? "single_transformer_blocks." : "single_blocks."));
  } else if (m.arch == ModelArch::kWan) {
    m.wan_blocks = idx.count_blocks(p + "blocks.");
  }
}

// Parent module of a parameter key: the key minus its last two components.
std::string_view parent_module(std::string_view key) {
  auto last = key.rfind('.');
  if (last == std::string_view::npos) return {};
  auto second = key.rfind('.', last - 1);
  return second == std::string_view::npos ? std::string_view{} : key.substr(0, second);
}

// UNet keys the model has and a pruned file lacks: unet_to_diffusers' ldm names whose module
// parent the file has, except skip_connection (only where a resblock changes the channel
// count) and the levels' last downsampler/upsampler (ComfyUI's map names one per level).
void complete_unet(LoaderModel& m, Builder& b, const std::vector<BaseTensor>& tensors, const NameIndex& idx,
                   const Family& f, const std::vector<FamilyPair>& pairs) {
  std::string key, file_key, parent;
  for (const FamilyPair& pair : pairs) {
    const std::string& file_rel = f.diffusers ? pair.diffusers : pair.original;
    file_key.assign(f.prefix).append(file_rel);
    if (idx.has(file_key)) continue;
    key.assign("diffusion_model.").append(pair.original);
    if (m.tensors.count(key) != 0) continue;
    parent.assign(parent_module(file_key));
    if (parent.empty()) continue;
    parent += '.';
    if (!idx.has_prefix(parent)) continue;
    if (pair.original.find("skip_connection.") != std::string::npos) {
      // in_layers.0 (GroupNorm over the input channels) vs out_layers.3 (conv to the output).
      const std::string block = pair.original.substr(0, pair.original.find("skip_connection."));
      const std::string in = f.diffusers ? "norm1.weight" : "in_layers.0.weight";
      const std::string out = f.diffusers ? "conv2.weight" : "out_layers.3.weight";
      const std::string file_block = f.diffusers ? pair.diffusers.substr(0, pair.diffusers.find("conv_shortcut.")) : block;
      const auto si = shape_of(tensors, idx.find(f.prefix + file_block + in));
      const auto so = shape_of(tensors, idx.find(f.prefix + file_block + out));
      if (si.empty() || so.empty() || si[0] == so[0]) continue;
    }
    b.missing(m.diffusion_keys, key, file_key);
  }
}

// Transformer families: a block-relative key present in an earlier and a later block of the
// same list but absent here was pruned (SD3's last context block and SD3.5's partial attn2
// layers are not holes: nothing follows them).
void complete_blocks(LoaderModel& m, Builder& b, const Family& f) {
  static const std::array<std::string_view, 5> lists{"double_blocks.", "single_blocks.", "joint_blocks.",
                                                      "transformer_blocks.", "blocks."};
  std::map<std::string, std::map<std::string, std::pair<int, int>>> seen;  // list -> rel -> [first, last]
  std::map<std::string, std::set<int>> present;
  const std::string root = "diffusion_model.";
  for (const std::string_view key : m.diffusion_keys) {
    const std::string_view rel = key.substr(root.size());
    for (std::string_view list : lists) {
      if (!starts_with(rel, list)) continue;
      const std::size_t dot = rel.find('.', list.size());
      if (dot == std::string_view::npos) break;
      const int block = std::atoi(std::string(rel.substr(list.size(), dot - list.size())).c_str());
      auto& range = seen[std::string(list)].try_emplace(std::string(rel.substr(dot + 1)), block, block).first->second;
      range.first = std::min(range.first, block);
      range.second = std::max(range.second, block);
      present[std::string(list)].insert(block);
      break;
    }
  }
  if (f.diffusers) return;  // a diffusers-layout file is read through the rename table only
  for (const auto& [list, rels] : seen) {
    for (int block : present[list]) {
      for (const auto& [rel, range] : rels) {
        if (block <= range.first || block >= range.second) continue;
        const std::string key = root + list + std::to_string(block) + "." + rel;
        if (m.tensors.count(key) == 0) b.missing(m.diffusion_keys, key, f.prefix + list + std::to_string(block) + "." + rel);
      }
    }
  }
}

void comfy_diffusion(LoaderModel& m, Builder& b, const std::vector<BaseTensor>& tensors, const NameIndex& idx,
                     const Family& f) {
  const auto names = diffusion_names(tensors, f);
  if (!f.diffusers) {
    std::string key;
    for (const auto& [rel, i] : names) {
      key.assign("diffusion_model.").append(rel);
      b.whole_at(m.diffusion_keys, key, static_cast<std::size_t>(i));
    }
  } else {
    // A diffusers-layout file: ComfyUI's model keys through the family map; fused weights
    // (Flux/SD3 qkv, Flux linear1) are assembled from several file tensors.
    for (const FamilyPair& pair : m.pairs) {
      const std::string file_key = f.prefix + pair.diffusers;
      if (!idx.has(file_key)) continue;
      const std::string key = "diffusion_model." + pair.original;
      if (pair.rows > 0) {
        b.piece(m.diffusion_keys, key, file_key, pair.offset);
      } else {
        b.whole(m.diffusion_keys, key, file_key);
      }
      if (pair.swap_halves) b.mark_swapped(key);
    }
  }
  if (m.unet) {
    complete_unet(m, b, tensors, idx, f, m.pairs);
  } else {
    complete_blocks(m, b, f);
  }
}

void diffusers_diffusion(LoaderModel& m, Builder& b, const std::vector<BaseTensor>& tensors, const NameIndex& idx,
                         const Family& f) {
  const auto names = diffusion_names(tensors, f);
  const std::string component = m.unet ? "unet." : "transformer.";
  if (f.diffusers || m.arch == ModelArch::kQwenImage) {
    std::string key;
    for (const auto& [rel, i] : names) {
      key.assign(component).append(rel);
      b.whole_at(m.diffusion_keys, key, static_cast<std::size_t>(i));
    }
    return;
  }
  // An original-layout file: diffusers' from_single_file converts it; fused weights become
  // row windows of the file tensor.
  for (const FamilyPair& pair : m.pairs) {
    const std::string file_key = f.prefix + pair.original;
    if (!idx.has(file_key)) continue;
    // diffusers' SDXL UNet has add_embedding, never class_embedding (both are label_emb).
    if (starts_with(pair.diffusers, m.arch == ModelArch::kSDXL ? "class_embedding." : "add_embedding.")) continue;
    const std::string key = component + pair.diffusers;
    if (pair.rows > 0) {
      b.window(m.diffusion_keys, key, file_key, pair.offset, pair.rows);
    } else {
      b.whole(m.diffusion_keys, key, file_key);
    }
    if (pair.swap_halves) b.mark_swapped(key);
  }
}

// --- text encoders -----------------------------------------------------------------------

struct TowerSpec {
  std::string_view file_prefix;  // root of the tower's keys in the file
  std::string_view marker;       // a key prefix (under file_prefix) proving the tower is there
  bool open_clip;
  std::string_view comfy;        // ComfyUI name
};

// ComfyUI's process_clip_state_dict per checkpoint layout, and ComfyUI's own names.
constexpr std::array<TowerSpec, 13> kTowers{{
    {"cond_stage_model.transformer.", "text_model.encoder.layers.0.", false, "clip_l"},
    {"cond_stage_model.transformer.", "encoder.layers.0.", false, "clip_l"},
    {"cond_stage_model.model.", "transformer.resblocks.0.", true, "clip_h"},
    {"conditioner.embedders.0.transformer.", "text_model.encoder.layers.0.", false, "clip_l"},
    {"conditioner.embedders.0.model.", "transformer.resblocks.0.", true, "clip_g"},
    {"conditioner.embedders.1.model.", "transformer.resblocks.0.", true, "clip_g"},
    {"text_encoders.clip_l.transformer.", "text_model.encoder.layers.0.", false, "clip_l"},
    {"text_encoders.clip_g.transformer.", "text_model.encoder.layers.0.", false, "clip_g"},
    {"text_encoders.t5xxl.transformer.", "encoder.block.0.", false, "t5xxl"},
    {"clip_l.transformer.", "text_model.encoder.layers.0.", false, "clip_l"},
    {"clip_g.transformer.", "text_model.encoder.layers.0.", false, "clip_g"},
    {"t5xxl.transformer.", "encoder.block.0.", false, "t5xxl"},
    {"clip_h.transformer.", "text_model.encoder.layers.0.", false, "clip_h"},
}};

// The towers of the file, with ComfyUI's names; diffusers-layout text_encoder* by family.
std::vector<TextTower> find_towers(const NameIndex& idx, ModelArch arch) {
  std::vector<TextTower> out;
  const auto add = [&out](std::string name, std::string prefix, bool open_clip) {
    for (const TextTower& t : out) {
      if (t.name == name) return;
    }
    out.push_back({std::move(name), std::move(prefix), open_clip});
  };
  for (const TowerSpec& s : kTowers) {
    if (idx.has_prefix(std::string(s.file_prefix) + std::string(s.marker))) add(std::string(s.comfy), std::string(s.file_prefix), s.open_clip);
  }
  if (idx.has_prefix("text_encoder.text_model.encoder.layers.0.")) {
    add(arch == ModelArch::kSD2 ? "clip_h" : "clip_l", "text_encoder.", false);
  }
  if (idx.has_prefix("text_encoder_2.text_model.encoder.layers.0.")) add("clip_g", "text_encoder_2.", false);
  if (idx.has_prefix("text_encoder_2.encoder.block.0.")) add("t5xxl", "text_encoder_2.", false);
  if (idx.has_prefix("text_encoder_3.encoder.block.0.")) add("t5xxl", "text_encoder_3.", false);
  // ComfyUI's model order: clip_l, clip_g, clip_h, t5xxl.
  const auto rank = [](const TextTower& t) {
    return t.name == "clip_l" ? 0 : t.name == "clip_g" ? 1 : t.name == "clip_h" ? 2 : 3;
  };
  std::stable_sort(out.begin(), out.end(), [&](const TextTower& a, const TextTower& b) { return rank(a) < rank(b); });
  return out;
}

// Tensors of a tower that are not model weights (buffers the loaders drop).
bool dropped(std::string_view rel) {
  return rel.ends_with("position_ids") || rel == "logit_scale" || rel.ends_with(".attn_mask");
}

// One tower as `model_prefix` + its model names (HF CLIP / T5 names).
void add_tower(LoaderModel& m, Builder& b, const std::vector<BaseTensor>& tensors, const NameIndex& idx,
               const TextTower& t, const std::string& model_prefix, bool comfy) {
  const std::string& p = t.file_prefix;
  std::int64_t width = 0;
  if (!t.open_clip) {
    const bool insert_text_model = !idx.has_prefix(p + "text_model.") && idx.has_prefix(p + "encoder.layers.");
    std::string key;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const BaseTensor& x = tensors[i];
      if (!starts_with(x.name, p)) continue;
      const std::string_view rel = x.name.substr(p.size());
      if (dropped(rel)) continue;
      key.assign(model_prefix);
      if (insert_text_model) key += "text_model.";  // ComfyUI's SD1 rule
      key.append(rel);
      b.whole_at(m.text_keys, key, i);
      if (key.ends_with("text_model.final_layer_norm.weight") && !x.shape.empty()) width = x.shape[0];
    }
  } else {
    // OpenCLIP -> HF (comfy/utils.py transformers_convert / clip_text_transformers_convert).
    const auto put = [&](const std::string& from, const std::string& to) { b.whole(m.text_keys, model_prefix + to, p + from); };
    put("token_embedding.weight", "text_model.embeddings.token_embedding.weight");
    put("positional_embedding", "text_model.embeddings.position_embedding.weight");
    static const std::array<std::pair<std::string_view, std::string_view>, 5> resblock{{
        {"ln_1", "layer_norm1"}, {"ln_2", "layer_norm2"}, {"mlp.c_fc", "mlp.fc1"},
        {"mlp.c_proj", "mlp.fc2"}, {"attn.out_proj", "self_attn.out_proj"}}};
    for (int l = 0; idx.has_prefix(p + "transformer.resblocks." + std::to_string(l) + "."); ++l) {
      const std::string from = p + "transformer.resblocks." + std::to_string(l) + ".";
      const std::string to = "text_model.encoder.layers." + std::to_string(l) + ".";
      for (const auto& [o, h] : resblock) {
        for (std::string_view end : {".weight", ".bias"}) {
          b.whole(m.text_keys, model_prefix + to + std::string(h) + std::string(end), from + std::string(o) + std::string(end));
        }
      }
      static const std::array<std::string_view, 3> qkv{"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"};
      for (int c = 0; c < 3; ++c) {
        b.window(m.text_keys, model_prefix + to + std::string(qkv[c]) + ".weight", from + "attn.in_proj_weight", 0, 0, c, 3);
        b.window(m.text_keys, model_prefix + to + std::string(qkv[c]) + ".bias", from + "attn.in_proj_bias", 0, 0, c, 3);
      }
    }
    put("ln_final.weight", "text_model.final_layer_norm.weight");
    put("ln_final.bias", "text_model.final_layer_norm.bias");
    const auto s = shape_of(tensors, idx.find(p + "ln_final.weight"));
    if (!s.empty()) width = s[0];
    if (idx.has(p + "text_projection")) {
      b.whole(m.text_keys, model_prefix + "text_projection.weight", p + "text_projection", /*transpose=*/true);
    } else {
      put("text_projection.weight", "text_projection.weight");
    }
  }
  // ComfyUI's CLIPTextModel always has a text_projection, identity-initialised.
  if (comfy && t.name != "t5xxl") {
    b.identity(m.text_keys, model_prefix + "text_projection.weight", p + "text_projection.weight", width);
  }
}

void comfy_text(LoaderModel& m, Builder& b, const std::vector<BaseTensor>& tensors, const NameIndex& idx) {
  for (const TextTower& t : m.towers) add_tower(m, b, tensors, idx, t, t.name + ".transformer.", true);
}

void diffusers_text(LoaderModel& m, Builder& b, const std::vector<BaseTensor>& tensors, const NameIndex& idx) {
  // Pipeline components: text_encoder = the first CLIP; SDXL/SD3: text_encoder_2 = bigG;
  // Flux: text_encoder_2 = T5; SD3: text_encoder_3 = T5.
  for (const TextTower& t : m.towers) {
    std::string component;
    if (t.name == "clip_l" || t.name == "clip_h") {
      component = "text_encoder.";
    } else if (t.name == "clip_g") {
      component = m.arch == ModelArch::kSDXL && !std::any_of(m.towers.begin(), m.towers.end(), [](const TextTower& x) { return x.name == "clip_l"; })
                      ? "text_encoder."  // SDXL refiner: its only encoder
                      : "text_encoder_2.";
    } else {
      component = m.arch == ModelArch::kFlux ? "text_encoder_2." : "text_encoder_3.";
    }
    add_tower(m, b, tensors, idx, t, component, false);
  }
}

LoaderModel build(const BaseFile& idx, bool comfy) {
  LoaderModel m;
  const std::vector<BaseTensor>& tensors = idx.tensors();
  Family f = find_family(tensors, idx);
  if (f.arch == ModelArch::kSD1) f.arch = unet_family(idx, f, tensors);
  m.arch = f.arch;
  m.diffusion_prefix = f.prefix;
  m.diffusers_layout = f.diffusers;
  m.file = &idx;
  m.tensors.reserve(tensors.size() + tensors.size() / 4);
  m.diffusion_keys.reserve(tensors.size());
  Builder b(m, idx);
  if (f.arch != ModelArch::kUnknown) {
    read_structure(m, tensors, idx, f);
    if (f.arch == ModelArch::kSD1 || f.arch == ModelArch::kSD2 || f.arch == ModelArch::kSDXL) {
      m.unet = read_unet(idx, f.prefix, f.diffusers);
    }
    m.pairs = family_pairs(m);
    if (comfy) {
      comfy_diffusion(m, b, tensors, idx, f);
    } else {
      diffusers_diffusion(m, b, tensors, idx, f);
    }
  } else if (comfy) {
    // A model ComfyUI has no detection rule for but holds in its "diffusion_model." state
    // dict (a custom node's model class; genscope's reference pipeline): the first loop of
    // model_lora_keys_unet (comfy/lora.py) still names each of its weights lora_unet_<key>
    // and <key>. Only files that use ComfyUI's own prefixes are read this way.
    for (const char* p : {"model.diffusion_model.", "diffusion_model."}) {
      if (!idx.has_prefix(p)) continue;
      Family g;
      g.prefix = p;
      m.diffusion_prefix = p;
      std::string key;
      for (const auto& [rel, i] : diffusion_names(tensors, g)) {
        key.assign("diffusion_model.").append(rel);
        b.whole_at(m.diffusion_keys, key, static_cast<std::size_t>(i));
      }
      break;
    }
  }
  m.towers = find_towers(idx, m.arch);
  if (comfy) {
    comfy_text(m, b, tensors, idx);
  } else {
    diffusers_text(m, b, tensors, idx);
  }
  return m;
}

}  // namespace

std::optional<UnetConfig> unet_config_of(const BaseFile& idx) {
  for (const BaseTensor& t : idx.tensors()) {
    for (const auto& [marker, diffusers] : {std::pair<std::string_view, bool>{"input_blocks.0.0.weight", false},
                                            std::pair<std::string_view, bool>{"down_blocks.0.resnets.0.", true}}) {
      const auto p = t.name.find(marker);
      if (p != std::string_view::npos && (p == 0 || t.name[p - 1] == '.')) {
        return read_unet(idx, std::string(t.name.substr(0, p)), diffusers);
      }
    }
  }
  return std::nullopt;
}

BaseFile::BaseFile(const SafetensorsFile& base) {
  tensors_.reserve(base.entries().size());
  for (const SafetensorsEntry& e : base.entries()) tensors_.push_back({e.name, e.shape});
  index();
}

BaseFile::BaseFile(const std::vector<std::string>& keys) {
  tensors_.reserve(keys.size());
  for (const std::string& k : keys) tensors_.push_back({k, {}});
  index();
}

void BaseFile::index() {
  sorted_.reserve(tensors_.size());
  for (std::size_t i = 0; i < tensors_.size(); ++i) sorted_.emplace_back(tensors_[i].name, i);
  std::sort(sorted_.begin(), sorted_.end());
}

long BaseFile::find(std::string_view name) const {
  const auto it = std::lower_bound(sorted_.begin(), sorted_.end(), name,
                                   [](const auto& a, std::string_view b) { return a.first < b; });
  return it != sorted_.end() && it->first == name ? static_cast<long>(it->second) : -1;
}

bool BaseFile::has_prefix(std::string_view prefix) const {
  const auto it = std::lower_bound(sorted_.begin(), sorted_.end(), prefix,
                                   [](const auto& a, std::string_view b) { return a.first < b; });
  return it != sorted_.end() && starts_with(it->first, prefix);
}

int BaseFile::count_blocks(const std::string& base) const {
  int i = 0;
  while (has_prefix(base + std::to_string(i) + ".")) ++i;
  return i;
}

std::string_view StringArena::intern(std::string_view s) {
  if (used_ + s.size() > capacity_) {
    capacity_ = std::max<std::size_t>(std::size_t{1} << 16, s.size());
    blocks_.push_back(std::make_unique<char[]>(capacity_));
    used_ = 0;
  }
  char* at = blocks_.back().get() + used_;
  std::copy(s.begin(), s.end(), at);
  used_ += s.size();
  return {at, s.size()};
}

const ModelTensor* LoaderModel::find(std::string_view key) const {
  const auto it = tensors.find(key);
  return it == tensors.end() ? nullptr : &it->second;
}

TensorView LoaderModel::view(const ModelTensor& t) const {
  TensorView v;
  v.kind = t.kind;
  v.swapped = t.swapped;
  const auto tensor = [&](std::int32_t i) -> const BaseTensor& { return file->tensors()[static_cast<std::size_t>(i)]; };
  if (t.split >= 0) {
    for (const auto& [i, row] : splits[static_cast<std::size_t>(t.split)]) {
      const BaseTensor& f = tensor(i);
      ModelPiece p;
      p.where.key = f.name;
      p.model_row = row;
      p.rows = f.shape.empty() ? 0 : f.shape[0];
      if (v.shape.empty() && !f.shape.empty()) {
        v.shape.assign(f.shape.begin(), f.shape.end());
        v.shape[0] = 0;
      }
      if (!v.shape.empty()) v.shape[0] = std::max(v.shape[0], row + p.rows);
      v.pieces.push_back(std::move(p));
    }
    return v;
  }
  ModelPiece p;
  switch (t.kind) {
    case ModelTensor::Kind::kInFile: {
      const BaseTensor& f = tensor(t.file);
      p.where.key = f.name;
      p.where.chunk = t.chunk;
      p.where.chunks = t.chunks;
      p.where.row_offset = t.row_offset;
      p.where.rows = t.rows;
      p.where.transpose = t.transpose;
      v.shape.assign(f.shape.begin(), f.shape.end());
      if (t.transpose && v.shape.size() == 2) std::swap(v.shape[0], v.shape[1]);
      if (!v.shape.empty()) v.shape[0] = t.rows > 0 ? t.rows : v.shape[0] / std::max<std::int64_t>(t.chunks, 1);
      break;
    }
    case ModelTensor::Kind::kMissing:
      p.where.key = t.would_be;
      break;
    case ModelTensor::Kind::kIdentity:
      p.where.key = t.would_be;
      p.where.materialize_identity = true;
      if (t.rows > 0) p.where.shape = {t.rows, t.rows};
      v.shape = p.where.shape;
      break;
  }
  v.pieces.push_back(std::move(p));
  return v;
}

LoaderModel comfy_model(const BaseFile& base) { return build(base, true); }
LoaderModel diffusers_model(const BaseFile& base) { return build(base, false); }

ModelArch detect_family(const BaseFile& idx, std::string* prefix, bool* diffusers) {
  Family f = find_family(idx.tensors(), idx);
  if (f.arch == ModelArch::kSD1) f.arch = unet_family(idx, f, idx.tensors());
  if (prefix != nullptr) *prefix = f.prefix;
  if (diffusers != nullptr) *diffusers = f.diffusers;
  return f.arch;
}

}  // namespace genscope::detail
