// diffusers' load_lora_weights, at the level of tensor names (huggingface/diffusers@019c4962f0bbfc90cd1ac86ced68fb8676e5a5f7):
//  1. <Pipeline>LoraLoaderMixin.lora_state_dict (src/diffusers/loaders/lora_pipeline.py)
//     converts foreign formats with src/diffusers/loaders/lora_conversion_utils.py:
//     SD/SDXL: kohya keys (every key lora_unet_/lora_te_/lora_te1_/lora_te2_) through
//     _maybe_map_sgm_blocks_to_diffusers + _convert_non_diffusers_lora_to_diffusers;
//     Flux: ".lora_down.weight" keys through _convert_kohya_flux_lora_to_diffusers;
//     Wan: "diffusion_model." keys through _convert_non_diffusers_wan_lora_to_diffusers,
//     "lora_unet_" keys through _convert_musubi_wan_lora_to_diffusers; Qwen-Image: alphas,
//     lora_unet_, diffusion_model. or "default." keys through
//     _convert_non_diffusers_qwen_lora_to_diffusers. "dora_scale" keys are dropped with a
//     warning (SD, SDXL, SD3, Flux, Wan). A converter that finds a key it cannot rename
//     raises ValueError; one that indexes a missing tensor raises KeyError.
//  2. load_lora_weights raises ValueError("Invalid LoRA checkpoint.") unless every key
//     contains "lora", then hands each pipeline component the keys under its prefix (unet.,
//     transformer., text_encoder., text_encoder_2.); keys under no component prefix are
//     not loaded.
//  3. The component converts to PEFT names (src/diffusers/utils/state_dict_utils.py:
//     UNet convert_unet_state_dict_to_peft when the first key has no "lora_A"; text encoders
//     convert_state_dict_to_diffusers then convert_state_dict_to_peft), and PEFT injects
//     LoRA layers into the modules the names reach (peft inject_adapter_in_model: ValueError
//     when none exists); keys of modules the model lacks are "unexpected keys" (warned, not
//     loaded).
// Formats genscope does not model (their load is reported as a failure of the model, not of
// diffusers): Flux xlabs / BFL control / fal kontext / "lora_transformer_" mixtures.
#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_set>
#include <unordered_map>

#include "lora/loader_fit.hpp"

namespace genscope::detail {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool contains(std::string_view s, std::string_view p) { return s.find(p) != std::string_view::npos; }

void replace_in(std::string& s, std::string_view from, std::string_view to) {
  for (std::size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  replace_in(s, from, to);
  return s;
}

// One key of the converted state dict and the LoRA tensor it came from (split tensors give
// several keys: rows [delta_row, delta_row + rows) of the source module's delta).
struct Key {
  std::string name;
  std::string_view source;
  std::int64_t delta_row = 0, rows = 0;
  std::string_view source2{};  ///< The up factor of a down/up pair the converter emits as two
                               ///< keys of one module (name: the down key's); the steps below
                               ///< treat both keys alike, so the pair travels as one.
};

struct Conversion {
  std::vector<Key> keys;
  std::vector<std::string_view> consumed;  // alphas folded into the weights or network_alphas
  std::optional<std::pair<std::string, std::string>> error;  // (python exception, message)
};

// ---- SD / SDXL --------------------------------------------------------------------------

// _maybe_map_sgm_blocks_to_diffusers (delimiter "_", block_slice_pos 5), one kohya key.
std::optional<std::string> sgm_to_diffusers(std::string_view key, int layers_per_block) {
  std::vector<std::string_view> parts;
  for (std::size_t a = 0, b; a <= key.size(); a = b + 1) {
    b = key.find('_', a);
    if (b == std::string_view::npos) b = key.size();
    parts.push_back(key.substr(a, b - a));
  }
  if (parts.size() < 7) return std::nullopt;
  const auto num = [](std::string_view s) -> std::optional<int> {
    if (s.empty() || !std::all_of(s.begin(), s.end(), ::isdigit)) return std::nullopt;
    return std::stoi(std::string(s));
  };
  const auto id = num(parts[4]);
  const auto inner = num(parts[5].substr(0, parts[5].find('.')));
  if (!id) return std::nullopt;
  // "_".join(split(delimiter)[:block_slice_pos - 1] + middle + parts[from:]).
  const auto join = [&](std::initializer_list<std::string_view> middle, std::size_t from) {
    std::string out(parts[0]);
    for (std::size_t i = 1; i < 4; ++i) out.append("_").append(parts[i]);
    for (std::string_view m : middle) out.append("_").append(m);
    for (std::size_t i = from; i < parts.size(); ++i) out.append("_").append(parts[i]);
    return out;
  };
  static const std::array<const char*, 3> kInner{"resnets", "attentions", "upsamplers"};
  if (contains(key, "input_blocks")) {
    if (!inner) return std::nullopt;
    const int block = (*id - 1) / (layers_per_block + 1), layer = (*id - 1) % (layers_per_block + 1);
    const bool op = contains(key, "op");
    return join({std::to_string(block), op ? "downsamplers" : kInner[std::min(*inner, 2)], op ? "0" : std::to_string(layer)}, 6);
  }
  if (contains(key, "middle_block")) {
    if (*id > 2) return std::nullopt;
    return join({*id == 1 ? "attentions" : "resnets", *id == 2 ? "1" : "0"}, 5);
  }
  if (contains(key, "output_blocks")) {
    if (!inner) return std::nullopt;
    const int block = *id / (layers_per_block + 1), layer = *id % (layers_per_block + 1);
    return join({std::to_string(block), kInner[std::min(*inner, 2)], *inner < 2 ? std::to_string(layer) : "0"}, 6);
  }
  return std::nullopt;
}

// _convert_unet_lora_key.
std::string unet_lora_key(std::string_view key) {
  std::string d(key.substr(std::string_view("lora_unet_").size()));
  std::replace(d.begin(), d.end(), '_', '.');
  for (const auto& [a, b] : std::initializer_list<std::pair<std::string_view, std::string_view>>{
           {"input.blocks", "down_blocks"}, {"down.blocks", "down_blocks"}, {"middle.block", "mid_block"},
           {"mid.block", "mid_block"}, {"output.blocks", "up_blocks"}, {"up.blocks", "up_blocks"},
           {"transformer.blocks", "transformer_blocks"}, {"to.q.lora", "to_q_lora"}, {"to.k.lora", "to_k_lora"},
           {"to.v.lora", "to_v_lora"}, {"to.out.0.lora", "to_out_lora"}, {"proj.in", "proj_in"},
           {"proj.out", "proj_out"}, {"emb.layers", "time_emb_proj"}}) {
    replace_in(d, a, b);
  }
  if (contains(d, "emb") && !contains(d, "time.emb.proj")) {
    // re.sub(r"\.\d+(?=\D*$)", "", d, count=1): the last ".<digits>" followed by no digit.
    std::size_t last_digit = d.find_last_of("0123456789");
    if (last_digit != std::string::npos) {
      std::size_t start = last_digit;
      while (start > 0 && std::isdigit(static_cast<unsigned char>(d[start - 1]))) --start;
      if (start > 0 && d[start - 1] == '.') d.erase(start - 1, last_digit - start + 2);
    }
  }
  if (contains(d, ".in.")) replace_in(d, "in.layers.2", "conv1");
  if (contains(d, ".out.")) replace_in(d, "out.layers.3", "conv2");
  if (contains(d, "downsamplers") || contains(d, "upsamplers")) replace_in(d, "op", "conv");
  if (contains(d, "skip")) replace_in(d, "skip.connection", "conv_shortcut");
  if (contains(d, "time.emb.proj")) replace_in(d, "time.emb.proj", "time_emb_proj");
  if (contains(d, "conv.shortcut")) replace_in(d, "conv.shortcut", "conv_shortcut");
  if (contains(d, "transformer_blocks") && (contains(d, "attn1") || contains(d, "attn2"))) {
    replace_in(d, "attn1", "attn1.processor");
    replace_in(d, "attn2", "attn2.processor");
  }
  return d;
}

// _convert_text_encoder_lora_key.
std::string text_lora_key(std::string_view key, std::string_view prefix) {
  std::string d(key.substr(prefix.size()));
  std::replace(d.begin(), d.end(), '_', '.');
  for (const auto& [a, b] : std::initializer_list<std::pair<std::string_view, std::string_view>>{
           {"text.model", "text_model"}, {"self.attn", "self_attn"}, {"q.proj.lora", "to_q_lora"},
           {"k.proj.lora", "to_k_lora"}, {"v.proj.lora", "to_v_lora"}, {"out.proj.lora", "to_out_lora"},
           {"text.projection", "text_projection"}}) {
    replace_in(d, a, b);
  }
  if (!contains(d, "self_attn") && !contains(d, "text_projection") && contains(d, "mlp")) {
    replace_in(d, ".lora.", ".lora_linear_layer.");
  }
  return d;
}

Conversion convert_sd(const std::vector<std::string_view>& keys, const LoaderModel& model) {
  Conversion c;
  const bool kohya = std::all_of(keys.begin(), keys.end(), [](std::string_view k) {
    return starts_with(k, "lora_te_") || starts_with(k, "lora_unet_") || starts_with(k, "lora_te1_") || starts_with(k, "lora_te2_");
  });
  if (!kohya) {
    for (std::string_view k : keys) c.keys.push_back({std::string(k), k});
    return c;
  }
  // _maybe_map_sgm_blocks_to_diffusers renames by the part of the key before its first dot
  // (the module name): done once per module name.
  bool sgm = false, not_sgm = false;
  for (std::string_view k : keys) {
    if (!contains(k, "block")) continue;  // in each name below
    if (contains(k, "input_blocks") || contains(k, "middle_block") || contains(k, "output_blocks")) {
      sgm = true;
    } else if (contains(k, "down_blocks") || contains(k, "mid_block") || contains(k, "up_blocks")) {
      not_sgm = true;
    }
  }
  const int per_block = model.unet && !model.unet->num_res_blocks.empty() ? model.unet->num_res_blocks[0] : 2;
  std::unordered_map<std::string_view, std::optional<std::string>> renamed;  // module name -> new name
  std::deque<std::string> renamed_keys;                                       // stable storage sd views
  std::vector<std::pair<std::string_view, std::string_view>> sd;             // renamed key, source
  sd.reserve(keys.size());
  std::string_view stem_seen;  // the keys of one module are adjacent: classify its name once
  bool is_sgm = false;
  for (std::string_view k : keys) {
    const std::string_view stem = k.substr(0, k.find('.'));
    if (stem != stem_seen) {
      stem_seen = stem;
      is_sgm = contains(stem, "block") &&
               (contains(stem, "input_blocks") || contains(stem, "middle_block") || contains(stem, "output_blocks"));
    }
    if (!is_sgm || contains(k, "text")) {
      sd.emplace_back(k, k);
    } else if (sgm && not_sgm) {
      continue;  // both layouts: the sgm keys are dropped
    } else {
      auto [it, inserted] = renamed.try_emplace(stem);
      if (inserted) it->second = sgm_to_diffusers(stem, per_block);
      if (!it->second) {
        c.error = {"ValueError", "Checkpoint not supported because layer " + std::string(k) + " not supported."};
        return c;
      }
      sd.emplace_back(renamed_keys.emplace_back(*it->second).append(k.substr(stem.size())), k);
    }
  }
  std::unordered_map<std::string_view, std::size_t> at;  // renamed key -> index in sd
  at.reserve(sd.size());
  for (std::size_t i = 0; i < sd.size(); ++i) at.emplace(sd[i].first, i);
  // _convert_non_diffusers_lora_to_diffusers.
  std::vector<bool> done(sd.size(), false);
  std::string probe;
  const auto find = [&](std::string_view name, std::string_view suffix) -> long {
    probe.assign(name).append(suffix);
    const auto it = at.find(probe);
    return it == at.end() ? -1 : static_cast<long>(it->second);
  };
  for (std::size_t i = 0; i < sd.size(); ++i) {
    const std::string_view key = sd[i].first;
    if (!key.ends_with("lora_down.weight")) continue;
    const std::string_view name = key.substr(0, key.find('.'));
    const long up = find(name, ".lora_up.weight");
    if (up < 0) {
      c.error = {"KeyError", "'" + std::string(name) + ".lora_up.weight'"};
      return c;
    }
    std::string diffusers, component;
    if (starts_with(name, "lora_unet_")) {
      diffusers = unet_lora_key(key);
      component = "unet.";
    } else if (starts_with(name, "lora_te_") || starts_with(name, "lora_te1_") || starts_with(name, "lora_te2_")) {
      const std::string_view prefix = starts_with(name, "lora_te_") ? "lora_te_" : starts_with(name, "lora_te1_") ? "lora_te1_" : "lora_te2_";
      diffusers = text_lora_key(key, prefix);
      component = prefix == "lora_te2_" ? "text_encoder_2." : "text_encoder.";
    } else {
      continue;
    }
    c.keys.push_back({component + diffusers, sd[i].second, 0, 0, sd[static_cast<std::size_t>(up)].second});
    done[i] = true;
    done[static_cast<std::size_t>(up)] = true;
    if (const long alpha = find(name, ".alpha"); alpha >= 0) {
      c.consumed.push_back(sd[static_cast<std::size_t>(alpha)].second);
      done[static_cast<std::size_t>(alpha)] = true;
    }
  }
  std::string left;
  for (std::size_t i = 0; i < sd.size(); ++i) {
    if (!done[i]) left.append(left.empty() ? "" : ", ").append(sd[i].first);
  }
  if (!left.empty()) c.error = {"ValueError", "The following keys have not been correctly renamed: " + left};
  return c;
}

// ---- Flux ---------------------------------------------------------------------------------

Conversion convert_flux_kohya(const std::vector<std::string_view>& keys, const LoraFile& lora) {
  Conversion c;
  std::map<std::string, std::string_view> sd;
  for (std::string_view k : keys) sd.emplace(std::string(k), k);
  const auto pop = [&](const std::string& k) -> std::optional<std::string_view> {
    const auto it = sd.find(k);
    if (it == sd.end()) return std::nullopt;
    const std::string_view v = it->second;
    sd.erase(it);
    return v;
  };
  if (std::any_of(keys.begin(), keys.end(), [](std::string_view k) { return starts_with(k, "lora_transformer_"); })) {
    c.error = {"genscope", "genscope does not model diffusers' conversion of this Flux format (lora_transformer_ mixture)"};
    return c;
  }
  const auto one = [&](const std::string& sds, const std::string& ait) {
    const auto down = pop(sds + ".lora_down.weight");
    if (!down) return;
    const auto up = pop(sds + ".lora_up.weight");
    if (!up) {
      c.error = {"KeyError", "'" + sds + ".lora_up.weight'"};
      return;
    }
    if (const auto a = pop(sds + ".alpha")) c.consumed.push_back(*a);
    c.keys.push_back({ait + ".lora_A.weight", *down, 0, 0, *up});
  };
  const auto cat = [&](const std::string& sds, const std::vector<std::string>& aits, std::vector<std::int64_t> dims) {
    const auto down = pop(sds + ".lora_down.weight");
    if (!down) return;
    const auto up = pop(sds + ".lora_up.weight");
    if (!up) {
      c.error = {"KeyError", "'" + sds + ".lora_up.weight'"};
      return;
    }
    if (const auto a = pop(sds + ".alpha")) c.consumed.push_back(*a);
    const SafetensorsEntry* e = lora.file().find(std::string(*up));
    const std::int64_t rows = e != nullptr && !e->shape.empty() ? e->shape[0] : 0;
    if (dims.empty()) dims.assign(aits.size(), rows / static_cast<std::int64_t>(aits.size()));
    std::int64_t sum = 0;
    for (std::int64_t d : dims) sum += d;
    if (sum != rows) {
      c.error = {"AssertionError", "assert sum(dims) == up_weight.shape[0] for " + sds + " (" + std::to_string(sum) +
                                       " != " + std::to_string(rows) + "): the converter assumes Flux.1's widths"};
      return;
    }
    std::int64_t row = 0;
    for (std::size_t i = 0; i < aits.size(); ++i) {
      c.keys.push_back({aits[i] + ".lora_A.weight", *down, row, dims[i], *up});
      row += dims[i];
    }
  };
  for (int i = 0; i < 19 && !c.error; ++i) {
    const std::string s = "lora_unet_double_blocks_" + std::to_string(i) + "_";
    const std::string t = "transformer.transformer_blocks." + std::to_string(i) + ".";
    one(s + "img_attn_proj", t + "attn.to_out.0");
    cat(s + "img_attn_qkv", {t + "attn.to_q", t + "attn.to_k", t + "attn.to_v"}, {});
    one(s + "img_mlp_0", t + "ff.net.0.proj");
    one(s + "img_mlp_2", t + "ff.net.2");
    one(s + "img_mod_lin", t + "norm1.linear");
    one(s + "txt_attn_proj", t + "attn.to_add_out");
    cat(s + "txt_attn_qkv", {t + "attn.add_q_proj", t + "attn.add_k_proj", t + "attn.add_v_proj"}, {});
    one(s + "txt_mlp_0", t + "ff_context.net.0.proj");
    one(s + "txt_mlp_2", t + "ff_context.net.2");
    one(s + "txt_mod_lin", t + "norm1_context.linear");
  }
  for (int i = 0; i < 38 && !c.error; ++i) {
    const std::string s = "lora_unet_single_blocks_" + std::to_string(i) + "_";
    const std::string t = "transformer.single_transformer_blocks." + std::to_string(i) + ".";
    cat(s + "linear1", {t + "attn.to_q", t + "attn.to_k", t + "attn.to_v", t + "proj_mlp"}, {3072, 3072, 3072, 12288});
    one(s + "linear2", t + "proj_out");
    one(s + "modulation_lin", t + "norm.linear");
  }
  if (c.error) return c;
  // assign_remaining_weights: the embedders and final layer (no alphas there).
  for (const auto& [sds, ait] : std::initializer_list<std::pair<const char*, const char*>>{
           {"lora_unet_guidance_in_in_layer", "transformer.time_text_embed.guidance_embedder.linear_1"},
           {"lora_unet_guidance_in_out_layer", "transformer.time_text_embed.guidance_embedder.linear_2"},
           {"lora_unet_img_in", "transformer.x_embedder"},
           {"lora_unet_txt_in", "transformer.context_embedder"},
           {"lora_unet_time_in_in_layer", "transformer.time_text_embed.timestep_embedder.linear_1"},
           {"lora_unet_time_in_out_layer", "transformer.time_text_embed.timestep_embedder.linear_2"},
           {"lora_unet_vector_in_in_layer", "transformer.time_text_embed.text_embedder.linear_1"},
           {"lora_unet_vector_in_out_layer", "transformer.time_text_embed.text_embedder.linear_2"},
           {"lora_unet_final_layer_adaLN_modulation_1", "transformer.norm_out.linear"},
           {"lora_unet_final_layer_linear", "transformer.proj_out"}}) {
    const std::string s(sds);
    if (sd.count(s + ".lora_down.weight") == 0 && sd.count(s + ".lora_up.weight") == 0) continue;
    const auto down = pop(s + ".lora_down.weight");
    const auto up = pop(s + ".lora_up.weight");
    if (!down || !up) {
      c.error = {"KeyError", "'" + s + (down ? ".lora_up.weight'" : ".lora_down.weight'")};
      return c;
    }
    c.keys.push_back({std::string(ait) + ".lora_A.weight", *down, 0, 0, *up});
  }
  std::string left;
  for (const auto& [key, source] : sd) {
    if (!starts_with(key, "lora_te")) left += (left.empty() ? "" : ", ") + key;
  }
  if (!left.empty()) {
    c.error = {"ValueError", "Incompatible keys detected: " + left};
    return c;
  }
  // The CLIP text encoder's kohya keys (lora_te_ / lora_te1_); others stay unsupported.
  for (auto it = sd.begin(); it != sd.end();) {
    const std::string key = it->first;
    ++it;
    if (!key.ends_with("lora_down.weight")) continue;
    const std::string name = key.substr(0, key.find('.'));
    if (!starts_with(name, "lora_te_") && !starts_with(name, "lora_te1_")) continue;
    const std::string d = text_lora_key(key, starts_with(name, "lora_te_") ? "lora_te_" : "lora_te1_");
    const auto down = pop(key);
    const auto up = pop(name + ".lora_up.weight");
    if (!up) {
      c.error = {"KeyError", "'" + name + ".lora_up.weight'"};
      return c;
    }
    c.keys.push_back({"text_encoder." + d, *down, 0, 0, *up});
    if (const auto a = pop(name + ".alpha")) c.consumed.push_back(*a);
    it = sd.lower_bound(key);
  }
  return c;  // what is left is "Unsupported keys for ai-toolkit" (warned, not loaded)
}

// ---- Wan ------------------------------------------------------------------------------------

Conversion convert_wan(const std::vector<std::string_view>& keys) {
  Conversion c;
  std::map<std::string, std::string_view> sd;
  const bool original = std::any_of(keys.begin(), keys.end(), [](std::string_view k) { return starts_with(k, "diffusion_model."); });
  const bool musubi = !original && std::any_of(keys.begin(), keys.end(), [](std::string_view k) { return starts_with(k, "lora_unet_"); });
  if (!original && !musubi) {
    for (std::string_view k : keys) c.keys.push_back({std::string(k), k});
    return c;
  }
  const auto pop = [&](const std::string& k) -> std::optional<std::string_view> {
    const auto it = sd.find(k);
    if (it == sd.end()) return std::nullopt;
    const std::string_view v = it->second;
    sd.erase(it);
    return v;
  };
  const auto key_error = [&](const std::string& k) { c.error = {"KeyError", "'" + k + "'"}; };
  if (musubi) {
    // _convert_musubi_wan_lora_to_diffusers: every block must have all its modules.
    std::set<int> blocks;
    for (std::string_view k : keys) {
      sd.emplace(std::string(k.substr(10)), k);
      const auto p = k.find("blocks_");
      if (p != std::string_view::npos) blocks.insert(std::atoi(std::string(k.substr(p + 7, 4)).c_str()));
    }
    const bool i2v = std::any_of(keys.begin(), keys.end(), [](std::string_view k) { return contains(k, "k_img"); }) &&
                     std::any_of(keys.begin(), keys.end(), [](std::string_view k) { return contains(k, "v_img"); });
    for (int i = 0; i < static_cast<int>(blocks.size()) && !c.error; ++i) {
      std::vector<std::pair<std::string, std::string>> mods;
      for (const auto& [o, d] : {std::pair{"q", "to_q"}, {"k", "to_k"}, {"v", "to_v"}, {"o", "to_out.0"}}) {
        mods.emplace_back("self_attn_" + std::string(o), "attn1." + std::string(d));
      }
      for (const auto& [o, d] : {std::pair{"q", "to_q"}, {"k", "to_k"}, {"v", "to_v"}, {"o", "to_out.0"}}) {
        mods.emplace_back("cross_attn_" + std::string(o), "attn2." + std::string(d));
      }
      if (i2v) {
        mods.emplace_back("cross_attn_k_img", "attn2.add_k_proj");
        mods.emplace_back("cross_attn_v_img", "attn2.add_v_proj");
      }
      mods.emplace_back("ffn_0", "ffn.net.0.proj");
      mods.emplace_back("ffn_2", "ffn.net.2");
      for (const auto& [o, d] : mods) {
        const std::string base = "blocks_" + std::to_string(i) + "_" + o;
        const auto down = pop(base + ".lora_down.weight");
        if (!down) return key_error(base + ".lora_down.weight"), c;
        const auto up = pop(base + ".lora_up.weight");
        if (!up) return key_error(base + ".lora_up.weight"), c;
        const auto alpha = pop(base + ".alpha");
        if (!alpha) return key_error(base + ".alpha"), c;
        c.consumed.push_back(*alpha);
        const std::string t = "transformer.blocks." + std::to_string(i) + "." + d;
        c.keys.push_back({t + ".lora_A.weight", *down, 0, 0, *up});
      }
    }
    if (!c.error && !sd.empty()) c.error = {"ValueError", "`state_dict` should be empty at this point but has " + sd.begin()->first + "..."};
    return c;
  }
  // _convert_non_diffusers_wan_lora_to_diffusers.
  std::set<int> blocks;
  for (std::string_view k : keys) {
    const std::string rel(k.substr(std::min<std::size_t>(k.size(), 16)));
    sd.emplace(rel, k);
    if (starts_with(rel, "blocks.")) blocks.insert(std::atoi(rel.c_str() + 7));
  }
  const bool any_a = std::any_of(sd.begin(), sd.end(), [](const auto& kv) { return contains(kv.first, "lora_A"); });
  const bool any_b = std::any_of(sd.begin(), sd.end(), [](const auto& kv) { return contains(kv.first, "lora_B"); });
  const std::string down_key = any_a ? "lora_A" : "lora_down", up_key = any_b ? "lora_B" : "lora_up";
  const bool i2v = std::any_of(sd.begin(), sd.end(), [](const auto& kv) { return contains(kv.first, "k_img"); }) &&
                   std::any_of(sd.begin(), sd.end(), [](const auto& kv) { return contains(kv.first, "v_img"); });
  const bool time_weight = std::any_of(sd.begin(), sd.end(), [](const auto& kv) {
    return starts_with(kv.first, "time_projection") && kv.first.ends_with(".weight");
  });
  for (auto it = sd.begin(); it != sd.end();) {
    const bool norm_diff = (it->first.ends_with(".diff") || it->first.ends_with(".diff_b")) && contains(it->first, "norm");
    const bool time = contains(it->first, "time_projection") && !time_weight;
    it = norm_diff || time ? sd.erase(it) : std::next(it);  // dropped: not loaded
  }
  const auto module = [&](const std::string& o, const std::string& t) {
    const auto a = pop(o + "." + down_key + ".weight");
    const auto b = pop(o + "." + up_key + ".weight");
    if (a && b) {
      c.keys.push_back({t + ".lora_A.weight", *a, 0, 0, *b});
    } else if (a) {
      c.keys.push_back({t + ".lora_A.weight", *a});
    } else if (b) {
      c.keys.push_back({t + ".lora_B.weight", *b});
    }
    if (const auto alpha = pop(o + ".alpha")) {
      if (!a || !b) return key_error(o + "." + (a ? up_key : down_key) + ".weight");
      c.consumed.push_back(*alpha);
    }
    if (const auto bias = pop(o + ".diff_b")) c.keys.push_back({t + ".lora_B.bias", *bias});
  };
  if (!blocks.empty()) {
    for (int i = *blocks.begin(); i <= *blocks.rbegin() && !c.error; ++i) {
      const std::string b = "blocks." + std::to_string(i) + ".", t = "transformer.blocks." + std::to_string(i) + ".";
      for (const auto& [o, d] : {std::pair{"q", "to_q"}, {"k", "to_k"}, {"v", "to_v"}, {"o", "to_out.0"}}) {
        module(b + "self_attn." + o, t + "attn1." + d);
      }
      for (const auto& [o, d] : {std::pair{"q", "to_q"}, {"k", "to_k"}, {"v", "to_v"}, {"o", "to_out.0"}}) {
        module(b + "cross_attn." + o, t + "attn2." + d);
      }
      if (i2v) {
        module(b + "cross_attn.k_img", t + "attn2.add_k_proj");
        module(b + "cross_attn.v_img", t + "attn2.add_v_proj");
      }
      module(b + "ffn.0", t + "ffn.net.0.proj");
      module(b + "ffn.2", t + "ffn.net.2");
    }
  }
  if (c.error) return c;
  for (const auto& [o, t] : std::initializer_list<std::pair<const char*, const char*>>{
           {"time_projection.1", "transformer.condition_embedder.time_proj"},
           {"head.head", "transformer.proj_out"},
           {"text_embedding.0", "transformer.condition_embedder.text_embedder.linear_1"},
           {"text_embedding.2", "transformer.condition_embedder.text_embedder.linear_2"},
           {"time_embedding.0", "transformer.condition_embedder.time_embedder.linear_1"},
           {"time_embedding.2", "transformer.condition_embedder.time_embedder.linear_2"},
           {"img_emb.proj.1", "transformer.condition_embedder.image_embedder.ff.net.0.proj"},
           {"img_emb.proj.3", "transformer.condition_embedder.image_embedder.ff.net.2"}}) {
    module(o, t);
  }
  if (c.error) return c;
  const bool only_diffs = std::all_of(sd.begin(), sd.end(), [](const auto& kv) { return contains(kv.first, ".diff"); });
  if (!sd.empty() && !only_diffs) c.error = {"ValueError", "`state_dict` should be empty at this point but has " + sd.begin()->first + "..."};
  return c;  // remaining .diff keys: "which we do not handle yet" (not loaded)
}

// ---- Qwen-Image -----------------------------------------------------------------------------

// convert_key of _convert_non_diffusers_qwen_lora_to_diffusers: "transformer_blocks_0_attn_to_q"
// -> "transformer_blocks.0.attn.to_q", keeping the protected n-grams joined.
std::string qwen_key(std::string_view key) {
  std::string_view base = key, suffix;
  if (const auto dot = key.find('.'); dot != std::string_view::npos) {
    base = key.substr(0, dot);
    suffix = key.substr(dot);
  }
  const std::string_view rest = base.substr(std::min<std::size_t>(base.size(), 19));  // after "transformer_blocks_"
  std::vector<std::string> parts;
  for (std::size_t a = 0, b; a <= rest.size(); a = b + 1) {
    b = rest.find('_', a);
    if (b == std::string_view::npos) b = rest.size();
    parts.emplace_back(rest.substr(a, b - a));
  }
  static const std::set<std::vector<std::string>> kProtected{
      {"to", "q"}, {"to", "k"}, {"to", "v"}, {"to", "out"}, {"add", "q"}, {"add", "k"}, {"add", "v"},
      {"txt", "mlp"}, {"img", "mlp"}, {"txt", "mod"}, {"img", "mod"}, {"add", "q", "proj"},
      {"add", "k", "proj"}, {"add", "v", "proj"}, {"to", "add", "out"}};
  std::vector<std::string> merged;
  for (std::size_t i = 0; i < parts.size();) {
    bool matched = false;
    for (std::size_t len : {3u, 2u}) {
      if (i + len > parts.size()) continue;
      std::vector<std::string> ng(parts.begin() + static_cast<long>(i), parts.begin() + static_cast<long>(i + len));
      if (kProtected.count(ng) != 0) {
        std::string j;
        for (std::size_t x = 0; x < ng.size(); ++x) j += (x ? "_" : "") + ng[x];
        merged.push_back(j);
        i += len;
        matched = true;
        break;
      }
    }
    if (!matched) merged.push_back(parts[i++]);
  }
  std::string out = "transformer_blocks";
  for (const std::string& m : merged) out += "." + m;
  return out + std::string(suffix);
}

Conversion convert_qwen(const std::vector<std::string_view>& keys) {
  Conversion c;
  const auto any = [&](auto pred) { return std::any_of(keys.begin(), keys.end(), pred); };
  const bool alphas = any([](std::string_view k) { return k.ends_with(".alpha"); });
  const bool lora_unet = any([](std::string_view k) { return starts_with(k, "lora_unet_"); });
  const bool diffusion_model = any([](std::string_view k) { return starts_with(k, "diffusion_model."); });
  const bool has_default = any([](std::string_view k) { return contains(k, "default."); });
  if (!alphas && !lora_unet && !diffusion_model && !has_default) {
    for (std::string_view k : keys) c.keys.push_back({std::string(k), k});
    return c;
  }
  std::map<std::string, std::string_view> sd;
  for (std::string_view k : keys) {
    std::string name(k);
    if (diffusion_model && starts_with(name, "diffusion_model.")) name = name.substr(16);
    if (lora_unet && starts_with(name, "lora_unet_")) name = qwen_key(std::string_view(name).substr(10));
    if (has_default) name = replace_all(name, "default.", "");
    sd.emplace(name, k);
  }
  const bool non_diffusers = std::any_of(sd.begin(), sd.end(), [](const auto& kv) {
    return contains(kv.first, ".lora_down.weight") || contains(kv.first, ".lora_up.weight");
  });
  const bool diffusers = std::any_of(sd.begin(), sd.end(), [](const auto& kv) {
    return contains(kv.first, ".lora_A.weight") || contains(kv.first, ".lora_B.weight");
  });
  std::map<std::string, std::string_view> left = sd;
  if (non_diffusers) {
    for (const auto& [k, source] : sd) {
      if (!k.ends_with(".lora_down.weight")) continue;
      const std::string base = k.substr(0, k.size() - 17);
      left.erase(k);
      const auto up = left.find(base + ".lora_up.weight");
      if (up == left.end()) {
        c.error = {"KeyError", "'" + base + ".lora_up.weight'"};
        return c;
      }
      const auto alpha = left.find(base + ".alpha");
      if (alpha == left.end()) {
        c.error = {"KeyError", "'" + base + ".alpha'"};
        return c;
      }
      c.keys.push_back({"transformer." + base + ".lora_A.weight", source, 0, 0, up->second});
      c.consumed.push_back(alpha->second);
      left.erase(up);
      left.erase(alpha);
    }
  } else if (diffusers) {
    for (const auto& [k, source] : sd) {
      if (contains(k, ".lora_A.weight") || contains(k, ".lora_B.weight")) {
        c.keys.push_back({"transformer." + k, source});
        left.erase(k);
      } else if (contains(k, ".alpha")) {
        left.erase(k);  // popped, unused
      }
    }
  }
  if (!left.empty()) c.error = {"ValueError", "`state_dict` should be empty at this point but has " + left.begin()->first + "..."};
  return c;
}

// ---- PEFT injection per component ---------------------------------------------------------

// state_dict_utils.convert_state_dict: ".processor." -> "." then the first matching pattern.
std::string convert_state_dict_key(std::string k, const std::vector<std::pair<std::string_view, std::string_view>>& mapping) {
  replace_in(k, ".processor.", ".");
  for (const auto& [pattern, to] : mapping) {
    if (contains(k, pattern)) {
      replace_in(k, pattern, to);
      break;
    }
  }
  return k;
}

const std::vector<std::pair<std::string_view, std::string_view>> kUnetToDiffusers{
    {".to_out_lora.up", ".to_out.0.lora_B"}, {".to_out_lora.down", ".to_out.0.lora_A"},
    {".to_q_lora.down", ".to_q.lora_A"},     {".to_q_lora.up", ".to_q.lora_B"},
    {".to_k_lora.down", ".to_k.lora_A"},     {".to_k_lora.up", ".to_k.lora_B"},
    {".to_v_lora.down", ".to_v.lora_A"},     {".to_v_lora.up", ".to_v.lora_B"},
    {".lora.up", ".lora_B"},                 {".lora.down", ".lora_A"},
    {".to_out.lora_magnitude_vector", ".to_out.0.lora_magnitude_vector"}};
const std::vector<std::pair<std::string_view, std::string_view>> kDiffusersOldToPeft{
    {".to_q_lora.up", ".q_proj.lora_B"},   {".to_q_lora.down", ".q_proj.lora_A"},
    {".to_k_lora.up", ".k_proj.lora_B"},   {".to_k_lora.down", ".k_proj.lora_A"},
    {".to_v_lora.up", ".v_proj.lora_B"},   {".to_v_lora.down", ".v_proj.lora_A"},
    {".to_out_lora.up", ".out_proj.lora_B"}, {".to_out_lora.down", ".out_proj.lora_A"},
    {".lora_linear_layer.up", ".lora_B"},  {".lora_linear_layer.down", ".lora_A"}};
const std::vector<std::pair<std::string_view, std::string_view>> kDiffusersToPeft{
    {".q_proj.lora_linear_layer.up", ".q_proj.lora_B"},   {".q_proj.lora_linear_layer.down", ".q_proj.lora_A"},
    {".k_proj.lora_linear_layer.up", ".k_proj.lora_B"},   {".k_proj.lora_linear_layer.down", ".k_proj.lora_A"},
    {".v_proj.lora_linear_layer.up", ".v_proj.lora_B"},   {".v_proj.lora_linear_layer.down", ".v_proj.lora_A"},
    {".out_proj.lora_linear_layer.up", ".out_proj.lora_B"}, {".out_proj.lora_linear_layer.down", ".out_proj.lora_A"},
    {".lora_linear_layer.up", ".lora_B"},                 {".lora_linear_layer.down", ".lora_A"},
    {"text_projection.lora.down.weight", "text_projection.lora_A.weight"},
    {"text_projection.lora.up.weight", "text_projection.lora_B.weight"}};
const std::vector<std::pair<std::string_view, std::string_view>> kPeftToDiffusers{
    {".q_proj.lora_B", ".q_proj.lora_linear_layer.up"},   {".q_proj.lora_A", ".q_proj.lora_linear_layer.down"},
    {".k_proj.lora_B", ".k_proj.lora_linear_layer.up"},   {".k_proj.lora_A", ".k_proj.lora_linear_layer.down"},
    {".v_proj.lora_B", ".v_proj.lora_linear_layer.up"},   {".v_proj.lora_A", ".v_proj.lora_linear_layer.down"},
    {".out_proj.lora_B", ".out_proj.lora_linear_layer.up"}, {".out_proj.lora_A", ".out_proj.lora_linear_layer.down"},
    {"to_k.lora_A", "to_k.lora.down"}, {"to_k.lora_B", "to_k.lora.up"}, {"to_q.lora_A", "to_q.lora.down"},
    {"to_q.lora_B", "to_q.lora.up"},   {"to_v.lora_A", "to_v.lora.down"}, {"to_v.lora_B", "to_v.lora.up"},
    {"to_out.0.lora_A", "to_out.0.lora.down"}, {"to_out.0.lora_B", "to_out.0.lora.up"}};
const std::vector<std::pair<std::string_view, std::string_view>> kDiffusersOldToDiffusers{
    {".to_q_lora.up", ".q_proj.lora_linear_layer.up"},   {".to_q_lora.down", ".q_proj.lora_linear_layer.down"},
    {".to_k_lora.up", ".k_proj.lora_linear_layer.up"},   {".to_k_lora.down", ".k_proj.lora_linear_layer.down"},
    {".to_v_lora.up", ".v_proj.lora_linear_layer.up"},   {".to_v_lora.down", ".v_proj.lora_linear_layer.down"},
    {".to_out_lora.up", ".out_proj.lora_linear_layer.up"}, {".to_out_lora.down", ".out_proj.lora_linear_layer.down"},
    {".to_k.lora_magnitude_vector", ".k_proj.lora_magnitude_vector"},
    {".to_v.lora_magnitude_vector", ".v_proj.lora_magnitude_vector"},
    {".to_q.lora_magnitude_vector", ".q_proj.lora_magnitude_vector"},
    {".to_out.lora_magnitude_vector", ".out_proj.lora_magnitude_vector"}};

// A text encoder's keys through convert_state_dict_to_diffusers then _to_peft; nullopt when
// the state dict type cannot be inferred ("Could not automatically infer state dict type").
std::optional<std::vector<Key>> text_encoder_to_peft(std::vector<Key> keys) {
  const auto any = [&](std::string_view p) {
    return std::any_of(keys.begin(), keys.end(), [&](const Key& k) { return contains(k.name, p); });
  };
  if (any("to_out_lora")) {
    for (Key& k : keys) k.name = convert_state_dict_key(std::move(k.name), kDiffusersOldToDiffusers);
  } else if (any(".lora_A.weight")) {
    for (Key& k : keys) k.name = convert_state_dict_key(std::move(k.name), kPeftToDiffusers);
  } else if (!any("lora_linear_layer")) {
    return std::nullopt;
  }
  if (any("to_out_lora")) {
    for (Key& k : keys) k.name = convert_state_dict_key(std::move(k.name), kDiffusersOldToPeft);
  } else if (any("lora_linear_layer")) {
    for (Key& k : keys) k.name = convert_state_dict_key(std::move(k.name), kDiffusersToPeft);
  } else {
    return std::nullopt;
  }
  return keys;
}


}  // namespace

LoraFit fit_diffusers(const LoraFile& lora, const LoraNames& names, const LoaderModel& model, bool targets) {
  LoraFit fit;
  fit.loader = LoraLoader::kDiffusers;
  fit.base_arch = model.arch;
  std::unordered_set<std::string_view> consumed;
  const auto fail = [&](const std::string& error, const std::string& message) {
    const bool ours = error == "genscope";
    fit.loader_failures.push_back({"", ours ? "LoraUnsupported" : "LoraLoaderError",
                                   ours ? message : "diffusers' load_lora_weights raises " + error + ": " + message});
    set_loaded(fit, names, {});
    fit.tensors_loaded = 0;
    return fit;
  };
  const ModelArch arch = model.arch;
  const bool unet = arch == ModelArch::kSD1 || arch == ModelArch::kSD2 || arch == ModelArch::kSDXL;
  if (arch == ModelArch::kUnknown) return fail("genscope", "genscope has no diffusers pipeline for this base");
  std::vector<std::string_view> keys;
  for (std::string_view k : names.sorted()) {
    // lora_state_dict drops DoRA scales with a warning (Qwen-Image's keeps them).
    if (arch != ModelArch::kQwenImage && contains(k, "dora_scale")) continue;
    keys.push_back(k);
  }
  Conversion conv;
  if (unet) {
    conv = convert_sd(keys, model);
  } else if (arch == ModelArch::kFlux) {
    if (std::any_of(keys.begin(), keys.end(), [](std::string_view k) { return contains(k, ".lora_down.weight"); })) {
      conv = convert_flux_kohya(keys, lora);
    } else if (std::any_of(keys.begin(), keys.end(), [](std::string_view k) {
                 return contains(k, "processor") || contains(k, "query_norm.scale") || contains(k, "base_model");
               })) {
      return fail("genscope", "genscope does not model diffusers' conversion of this Flux format (xlabs / BFL control / fal kontext)");
    } else {
      for (std::string_view k : keys) conv.keys.push_back({std::string(k), k});
    }
  } else if (arch == ModelArch::kWan) {
    conv = convert_wan(keys);
  } else if (arch == ModelArch::kQwenImage) {
    conv = convert_qwen(keys);
  } else {
    for (std::string_view k : keys) conv.keys.push_back({std::string(k), k});
  }
  if (conv.error) return fail(conv.error->first, conv.error->second);
  consumed.insert(conv.consumed.begin(), conv.consumed.end());
  // Alphas left in a PEFT-style state dict become network_alphas (Flux: any key with "alpha").
  std::vector<Key> state;
  for (Key& k : conv.keys) {
    if (arch == ModelArch::kFlux && contains(k.name, "alpha")) {
      consumed.insert(k.source);
      continue;
    }
    state.push_back(std::move(k));
  }
  for (const Key& k : state) {
    if (!contains(k.name, "lora")) return fail("ValueError", "Invalid LoRA checkpoint. (key '" + k.name + "')");
  }
  // Components of the pipeline and their LoRA prefixes.
  std::vector<std::string> components;
  if (unet) {
    components = {"unet", "text_encoder"};
    if (arch == ModelArch::kSDXL) components.push_back("text_encoder_2");
  } else if (arch == ModelArch::kSD3) {
    components = {"transformer", "text_encoder", "text_encoder_2"};
  } else if (arch == ModelArch::kFlux) {
    components = {"transformer", "text_encoder"};
  } else {
    components = {"transformer"};
  }
  std::map<const LoraModule*, std::vector<const Key*>> applied;
  std::vector<Key> converted;
  converted.reserve(state.size());
  std::string module, lookup;
  for (const std::string& component : components) {
    const std::string prefix = component + ".";
    std::vector<Key> mine;
    for (Key& k : state) {
      // k.split(".")[0] == prefix: the first dot right after the component name.
      if (k.name.size() > prefix.size() && starts_with(k.name, prefix)) {
        mine.push_back({k.name.substr(prefix.size()), k.source, k.delta_row, k.rows, k.source2});
      }
    }
    if (mine.empty()) continue;  // "No LoRA keys associated to ... found with the prefix"
    if (component == "unet" || component == "transformer") {
      if (component == "unet" && !contains(mine.front().name, "lora_A")) {
        for (Key& k : mine) k.name = convert_state_dict_key(std::move(k.name), kUnetToDiffusers);
      }
    } else {
      auto peft = text_encoder_to_peft(std::move(mine));
      if (!peft) return fail("ValueError", "Could not automatically infer state dict type (" + component + ")");
      mine = std::move(*peft);
    }
    // PEFT: inject into the modules the names reach (name.split(".lora")[0]); the rest are
    // unexpected keys.
    bool any_module = false;
    for (Key& k : mine) {
      module.assign(prefix).append(std::string_view(k.name).substr(0, k.name.find(".lora")));
      lookup.assign(module).append(".weight");
      if (model.find(lookup) == nullptr) continue;
      any_module = true;
      consumed.insert(k.source);
      if (!k.source2.empty()) consumed.insert(k.source2);
      k.name = module;
      converted.push_back(std::move(k));
    }
    if (!any_module) {
      return fail("ValueError", "Target modules not found in the base model (" + component + ")");
    }
  }
  if (!targets) {
    set_loaded(fit, names, consumed);
    return fit;
  }
  // Group the loaded keys by (LoRA module, diffusers module): one patch each.
  std::unordered_map<std::string_view, const LoraModule*> module_of;
  for (const LoraModule& m : lora.modules()) {
    for (const auto& [role, key] : m.tensors) module_of.emplace(key, &m);
  }
  std::unordered_map<std::string, std::size_t> seen;  // "<module>\n<diffusers module>" -> index
  std::vector<std::tuple<const LoraModule*, std::string, std::int64_t, std::int64_t>> order;
  for (Key& k : converted) {
    const auto it = module_of.find(k.source);
    if (it == module_of.end()) continue;
    if (seen.emplace(it->second->name + "\n" + k.name, order.size()).second) {
      order.emplace_back(it->second, std::move(k.name), k.delta_row, k.rows);
    }
  }
  for (const auto& [m, name, delta_row, delta_rows] : order) {
    const ModelTensor* t = model.find(name + ".weight");
    ModelPatch p;
    p.module = m;
    p.tensor = model.view(*t);
    p.patch_key = name + ".weight";
    // A slice of a fused module's delta (kohya Flux qkv split into to_q/to_k/to_v).
    p.delta_row = delta_row;
    p.delta_rows = delta_rows;
    // PEFT lora_bias: a converted diff_b patches the module's bias.
    if (const auto b = m->tensors.find("diff_b"); b != m->tensors.end() && consumed.count(b->second) != 0) {
      if (const ModelTensor* bt = model.find(name + ".bias")) p.bias = model.view(*bt);
    }
    add_matched(fit, p);
    const bool dora_loaded = std::any_of(m->tensors.begin(), m->tensors.end(), [&](const auto& rt) {
      return rt.first == "dora_scale" && consumed.count(rt.second) != 0;
    });
    if (m->dora && !dora_loaded) {
      fit.merge_unsupported.push_back({m->name, "LoraUnsupported",
                                       "LoRA module '" + m->name + "': diffusers drops its dora_scale and applies the plain LoRA"});
    }
  }
  set_loaded(fit, names, consumed);
  return fit;
}

}  // namespace genscope::detail
