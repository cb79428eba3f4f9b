// ComfyUI's key maps, rule by rule, from Comfy-Org/ComfyUI@17358c8f73b581a0d22facc3c385822f09b8bfb1
// comfy/lora.py (model_lora_keys_unet, model_lora_keys_clip) and comfy/utils.py at
// 09708eae709a992a5684bed3595ce4d07e705b4e (unet_to_diffusers, mmdit_to_diffusers,
// flux_to_diffusers). Only the families genscope models are covered (SD1.x/SD2.x/SDXL UNets,
// SD3, Flux, Qwen-Image, Wan and their text encoders); the other isinstance branches of
// model_lora_keys_unet (Cascade, AuraFlow, PixArt, HunyuanDiT, Mochi, HunyuanVideo, HiDream,
// ...) do not apply to them.
#include "lora/comfy_key_map.hpp"

#include <array>
#include <set>
#include <unordered_map>


namespace genscope::detail {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

void underscores(std::string& s, std::size_t from) {
  for (std::size_t i = from; i < s.size(); ++i) {
    if (s[i] == '.') s[i] = '_';
  }
}

// A reusable name buffer: prefix + body [with '.' -> '_'] + suffix, without allocating per name.
class Namer {
 public:
  explicit Namer(const ComfyKeySink& emit) : emit_(emit) {}
  void put(std::string_view prefix, std::string_view body, bool under, const ComfyTarget& t,
           std::string_view suffix = {}) {
    buf_.assign(prefix);
    const std::size_t from = buf_.size();
    buf_.append(body);
    if (under) underscores(buf_, from);
    buf_.append(suffix);
    emit_(buf_, t);
  }

 private:
  const ComfyKeySink& emit_;
  std::string buf_;
};

std::string_view strip_weight(std::string_view k) { return k.substr(0, k.size() - 7); }

// The family pairs as ComfyUI's dict holds them: each diffusers name once, at its first
// position, with its last value (SD3 and Flux maps assign some names twice).
std::vector<const FamilyPair*> as_dict(const std::vector<FamilyPair>& pairs) {
  std::unordered_map<std::string_view, std::size_t> at;
  at.reserve(pairs.size());
  std::vector<const FamilyPair*> out;
  out.reserve(pairs.size());
  for (const FamilyPair& p : pairs) {
    const auto [it, inserted] = at.try_emplace(p.diffusers, out.size());
    if (inserted) {
      out.push_back(&p);
    } else {
      out[it->second] = &p;
    }
  }
  return out;
}

void unet_keys(const LoaderModel& m, Namer& n) {
  std::string key;  // the model key of a mapped name; targets view it during emit only
  // Generic names of every diffusion-model key.
  for (const std::string_view k : m.diffusion_keys) {
    const ComfyTarget t{k};
    const std::string_view rel = k.substr(16);  // after "diffusion_model."
    if (k.ends_with(".weight")) {
      n.put("lora_unet_", strip_weight(rel), true, t);
      n.put("", strip_weight(k), false, t);  // generic lora format
    } else {
      n.put("", k, false, t);
    }
  }
  // UNets: the diffusers names of every weight (unet_to_diffusers), attention through
  // ".processor." only.
  if (m.unet) {
    std::string proc;
    for (const FamilyPair& p : m.pairs) {  // unet_to_diffusers names each weight once
      if (!p.diffusers.ends_with(".weight")) continue;
      key.assign("diffusion_model.").append(p.original);
      const ComfyTarget t{key};
      const std::string_view d = strip_weight(p.diffusers);
      n.put("lora_unet_", d, true, t);
      n.put("lycoris_", d, true, t);  // simpletuner lycoris format
      proc.assign(d);
      for (std::size_t pos = proc.find(".to_"); pos != std::string::npos; pos = proc.find(".to_", pos + 14)) {
        proc.replace(pos, 4, ".processor.to_");
      }
      if (proc.ends_with(".to_out.0")) proc.resize(proc.size() - 2);
      n.put("", proc, false, t);
      n.put("unet.", proc, false, t);
    }
  }
  const auto mapped = [&](const FamilyPair& p) {
    key.assign("diffusion_model.").append(p.original);
    ComfyTarget t{key};
    t.offset = p.offset;
    t.rows = p.rows;
    t.swap = p.swap_halves;
    return t;
  };
  if (m.arch == ModelArch::kSD3) {  // Diffusers lora SD3
    for (const FamilyPair* pp : as_dict(m.pairs)) {
      const FamilyPair& p = *pp;
      if (!p.diffusers.ends_with(".weight")) continue;
      const ComfyTarget t = mapped(p);
      const std::string_view d = strip_weight(p.diffusers);
      n.put("transformer.", d, false, t);
      n.put("base_model.model.", d, false, t);
      n.put("lora_transformer_", d, true, t);  // OneTrainer
      n.put("lycoris_", d, true, t);
    }
  }
  if (m.arch == ModelArch::kFlux) {  // Diffusers lora Flux
    for (const FamilyPair* pp : as_dict(m.pairs)) {
      const FamilyPair& p = *pp;
      if (!p.diffusers.ends_with(".weight")) continue;
      const ComfyTarget t = mapped(p);
      const std::string_view d = strip_weight(p.diffusers);
      n.put("transformer.", d, false, t);
      n.put("lycoris_", d, true, t);
      n.put("lora_transformer_", d, true, t);
      n.put("", d, false, t);  // DiffSynth
    }
    for (const std::string_view k : m.diffusion_keys) {
      if (!k.ends_with(".linear1.weight")) continue;
      ComfyTarget t{k};
      t.rows = m.flux_hidden * 3;
      n.put("", k.substr(0, k.size() - 15), false, t, ".linear1_qkv");
    }
  }
  if (m.arch == ModelArch::kQwenImage) {
    for (const std::string_view k : m.diffusion_keys) {
      if (!k.ends_with(".weight")) continue;
      const std::string_view key_lora = strip_weight(k.substr(16));
      std::vector<std::pair<std::string, ComfyTarget>> targets;
      if (key_lora.ends_with(".img_mlp.gate_up")) {  // Qwen Image 2.1: halves of the fused weight
        const ModelTensor* mt = m.find(k);
        const auto shape = mt != nullptr ? m.view(*mt).shape : std::vector<std::int64_t>{};
        const std::int64_t half = !shape.empty() ? shape[0] / 2 : 0;
        const std::string base(key_lora.substr(0, key_lora.size() - 8));
        ComfyTarget a{k}, b{k};
        a.rows = half;
        b.offset = half;
        b.rows = half;
        targets.emplace_back(base + ".gate_layer", a);
        targets.emplace_back(base + ".proj", b);
      } else {
        targets.emplace_back(std::string(key_lora), ComfyTarget{k});
      }
      for (const auto& [name, t] : targets) {
        n.put("", name, false, t);
        n.put("transformer.", name, false, t);
        n.put("lycoris_", name, true, t);
      }
    }
  }
}

constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kLoraClipMap{{
    {"mlp.fc1", "mlp_fc1"},
    {"mlp.fc2", "mlp_fc2"},
    {"self_attn.k_proj", "self_attn_k_proj"},
    {"self_attn.q_proj", "self_attn_q_proj"},
    {"self_attn.v_proj", "self_attn_v_proj"},
    {"self_attn.out_proj", "self_attn_out_proj"},
}};

void clip_keys(const LoaderModel& m, Namer& n) {
  std::set<std::string_view> prefixes;
  for (const std::string_view k : m.text_keys) {
    if (!k.ends_with(".weight")) continue;
    const ComfyTarget t{k};
    n.put("text_encoders.", strip_weight(k), false, t);  // generic lora format
    const std::size_t tp = k.find(".transformer.");
    if (tp != std::string_view::npos && tp > 0 && !starts_with(k, "clip_")) {
      n.put("text_encoders.", strip_weight(k.substr(tp + 1)), false, t);
    }
    prefixes.insert(k.substr(0, k.find('.')));
  }
  bool clip_l_present = false, clip_g_present = false;
  std::string key;
  const auto lookup = [&](std::string_view tower, int b, std::string_view c) -> const std::string_view* {
    key.assign(tower).append(".transformer.text_model.encoder.layers.").append(std::to_string(b)).append(".").append(c).append(".weight");
    const auto it = m.tensors.find(key);
    return it == m.tensors.end() ? nullptr : &it->first;
  };
  for (int b = 0; b < 32; ++b) {
    const std::string layer = std::to_string(b) + "_";
    for (const auto& [c, lc] : kLoraClipMap) {
      const std::string hf = std::to_string(b) + "." + std::string(c);
      if (const std::string_view* k = lookup("clip_h", b, c)) {
        const ComfyTarget t{*k};
        n.put("lora_te_text_model_encoder_layers_", layer, false, t, lc);
        n.put("lora_te1_text_model_encoder_layers_", layer, false, t, lc);
        n.put("text_encoder.text_model.encoder.layers.", hf, false, t);
      }
      if (const std::string_view* k = lookup("clip_l", b, c)) {
        const ComfyTarget t{*k};
        n.put("lora_te_text_model_encoder_layers_", layer, false, t, lc);
        n.put("lora_te1_text_model_encoder_layers_", layer, false, t, lc);
        clip_l_present = true;
        n.put("text_encoder.text_model.encoder.layers.", hf, false, t);
      }
      if (const std::string_view* k = lookup("clip_g", b, c)) {
        const ComfyTarget t{*k};
        clip_g_present = true;
        if (clip_l_present) {
          n.put("lora_te2_text_model_encoder_layers_", layer, false, t, lc);
          n.put("text_encoder_2.text_model.encoder.layers.", hf, false, t);
        } else {
          n.put("lora_te_text_model_encoder_layers_", layer, false, t, lc);
          n.put("text_encoder.text_model.encoder.layers.", hf, false, t);
          n.put("lora_prior_te_text_model_encoder_layers_", layer, false, t, lc);
        }
      }
    }
  }
  for (const std::string_view k : m.text_keys) {
    if (!k.ends_with(".weight") || !starts_with(k, "t5xxl.transformer.")) continue;  // OneTrainer SD3 and Flux
    const ComfyTarget t{k};
    const std::string_view l_key = strip_weight(k.substr(18));
    int t5_index = 1;
    if (clip_g_present) ++t5_index;
    if (clip_l_present) {
      ++t5_index;
      if (t5_index == 2) {
        n.put("lora_te2_", l_key, true, t);  // OneTrainer Flux
        ++t5_index;
      }
    }
    n.put("lora_te" + std::to_string(t5_index) + "_", l_key, true, t);
  }
  if (prefixes.size() == 1) {  // single llama-style text encoder (kohya anima)
    const std::string full_prefix = std::string(*prefixes.begin()) + ".transformer.model.";
    for (const std::string_view k : m.text_keys) {
      if (k.ends_with(".weight") && starts_with(k, full_prefix)) {
        n.put("lora_te_", strip_weight(k.substr(full_prefix.size())), true, ComfyTarget{k});
      }
    }
  }
  if (const auto it = m.tensors.find("clip_g.transformer.text_projection.weight"); it != m.tensors.end()) {
    n.put("lora_prior_te_text_projection", "", false, ComfyTarget{it->first});
    n.put("lora_te2_text_projection", "", false, ComfyTarget{it->first});  // OneTrainer SD3 lora
  }
  if (const auto it = m.tensors.find("clip_l.transformer.text_projection.weight"); it != m.tensors.end()) {
    n.put("lora_te1_text_projection", "", false, ComfyTarget{it->first});
  }
}

}  // namespace

void comfy_key_map(const LoaderModel& model, const ComfyKeySink& emit) {
  Namer n(emit);
  unet_keys(model, n);
  clip_keys(model, n);
}

std::string comfy_patch_key(const ComfyTarget& t) {
  std::string out;
  if (t.rows > 0) {
    out = "('" + std::string(t.model_key) + "', (0, " + std::to_string(t.offset) + ", " + std::to_string(t.rows) + "))";
  } else if (t.swap) {
    out = "('" + std::string(t.model_key) + "', None, swap_scale_shift)";
  } else {
    out = std::string(t.model_key);
  }
  return out;
}

}  // namespace genscope::detail
