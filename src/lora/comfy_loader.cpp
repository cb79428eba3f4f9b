// ComfyUI's LoraLoader, step by step (Comfy-Org/ComfyUI@17358c8f73b581a0d22facc3c385822f09b8bfb1):
//  1. comfy/sd.py load_lora_for_models builds key_map = model_lora_keys_unet then
//     model_lora_keys_clip (comfy_key_map.cpp);
//  2. comfy/lora.py load_lora walks key_map in insertion order; for each name x it marks
//     x.alpha / x.dora_scale loaded, asks each weight adapter (comfy/weight_adapter:
//     LoRAAdapter, LoHaAdapter, LoKrAdapter, ...) whether x has its tensors, then w_norm /
//     b_norm, diff, diff_b, set_weight; patch_dict[target] = patch, so a later name reaching
//     the same target replaces an earlier one (the shadowed module below), and an adapter
//     that finds its first tensor but not the rest raises KeyError (the load fails);
//  3. every LoRA key no adapter took is printed "lora key not loaded: <key>";
//  4. ModelPatcher.add_patches keeps the patch keys the model has; the others are printed
//     "NOT LOADED <key>".
// ComfyUI builds its model from the detected config, so a weight a pruned file lacks is
// still patched: genscope reports it as "missing from this file" (a merge cannot patch it).
#include <algorithm>
#include <optional>
#include <unordered_map>

#include "lora/comfy_key_map.hpp"
#include "lora/loader_fit.hpp"

namespace genscope::detail {
namespace {

enum class WeightPatch { kNone, kLora, kLoha, kLokr, kNorm, kDiff, kSet };

// What load_lora takes from the LoRA for one key-map name.
struct Loaded {
  std::vector<std::string_view> keys;  // tensor names marked loaded
  WeightPatch weight = WeightPatch::kNone;
  bool bias = false;              // diff_b, or b_norm with w_norm
  bool dora = false;              // x.dora_scale present
  std::optional<std::string> key_error;  // the tensor an adapter indexed and did not find
};

// load_lora for name x = the module's name. Every tensor "x<suffix>" of the LoRA is one of the
// module's own (the grouping splits keys at these suffixes), so looking among them is
// looking in the whole file.
Loaded load(const LoraModule& module) {
  Loaded out;
  const std::string& x = module.name;
  std::array<std::string_view, 16> present{};
  std::size_t n = 0;
  for (const auto& [role, key] : module.tensors) {
    if (n < present.size()) present[n++] = key;
  }
  const auto find = [&](std::string_view suffix) -> std::string_view {
    for (std::size_t i = 0; i < n; ++i) {
      const std::string_view k = present[i];
      if (k.size() == x.size() + suffix.size() && k.substr(x.size()) == suffix) return k;
    }
    return {};
  };
  const auto has = [&](std::string_view suffix) { return !find(suffix).empty(); };
  const auto take = [&](std::string_view suffix) { out.keys.push_back(find(suffix)); };
  const auto need = [&](std::string_view suffix) {
    if (has(suffix)) {
      take(suffix);
    } else if (!out.key_error) {
      out.key_error = x + std::string(suffix);
    }
  };
  if (has(".alpha")) take(".alpha");
  if (has(".dora_scale")) {
    take(".dora_scale");
    out.dora = true;
  }
  // LoRAAdapter.load: the first up-name found decides the down-name it indexes.
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 7> kLoraNames{{
      {".lora_up.weight", ".lora_down.weight"},
      {"_lora.up.weight", "_lora.down.weight"},
      {".lora_B.weight", ".lora_A.weight"},
      {".lora.up.weight", ".lora.down.weight"},
      {".lora_B", ".lora_A"},
      {".lora_linear_layer.up.weight", ".lora_linear_layer.down.weight"},
      {".lora_B.default.weight", ".lora_A.default.weight"},
  }};
  for (std::size_t i = 0; i < kLoraNames.size(); ++i) {
    if (!has(kLoraNames[i].first)) continue;
    if (i == 0 && has(".lora_mid.weight")) take(".lora_mid.weight");
    if (has(".reshape_weight")) take(".reshape_weight");
    take(kLoraNames[i].first);
    need(kLoraNames[i].second);
    out.weight = WeightPatch::kLora;
    break;
  }
  // LoHaAdapter.load
  if (has(".hada_w1_a")) {
    if (has(".hada_t1")) {
      take(".hada_t1");
      need(".hada_t2");
    }
    take(".hada_w1_a");
    for (std::string_view s : {".hada_w1_b", ".hada_w2_a", ".hada_w2_b"}) need(s);
    out.weight = WeightPatch::kLoha;
  }
  // LoKrAdapter.load: every lokr tensor present is taken; a patch when a factor is there.
  bool lokr = false;
  for (std::string_view s : {".lokr_w1", ".lokr_w2", ".lokr_w1_a", ".lokr_w1_b", ".lokr_w2_a", ".lokr_w2_b", ".lokr_t2"}) {
    if (!has(s)) continue;
    take(s);
    lokr = lokr || s == ".lokr_w1" || s == ".lokr_w2" || s == ".lokr_w1_a" || s == ".lokr_w2_a";
  }
  if (lokr) out.weight = WeightPatch::kLokr;
  if (has(".w_norm")) {
    take(".w_norm");
    out.weight = WeightPatch::kNorm;
    if (has(".b_norm")) {
      take(".b_norm");
      out.bias = true;
    }
  }
  if (has(".diff")) {
    take(".diff");
    out.weight = WeightPatch::kDiff;
  }
  if (has(".diff_b")) {
    take(".diff_b");
    out.bias = true;
  }
  if (has(".set_weight")) {
    take(".set_weight");
    out.weight = WeightPatch::kSet;
  }
  return out;
}

// The genscope module type that computes the patch ComfyUI applies.
bool same_kind(WeightPatch w, LoraModuleType t) {
  switch (w) {
    case WeightPatch::kNone: return true;
    case WeightPatch::kLora: return t == LoraModuleType::kLora;
    case WeightPatch::kLoha: return t == LoraModuleType::kLoha;
    case WeightPatch::kLokr: return t == LoraModuleType::kLokr;
    case WeightPatch::kNorm: return t == LoraModuleType::kNorm;
    case WeightPatch::kDiff: return t == LoraModuleType::kDiff;
    case WeightPatch::kSet: return t == LoraModuleType::kSetWeight;
  }
  return false;
}

// One patch_dict entry: its target and who wrote it, in order.
struct Slot {
  std::string patch_key;
  std::string model_key;
  std::int64_t offset = 0, rows = 0;
  bool swap = false;
  bool bias = false;
  std::vector<const LoraModule*> writers;
};

// A key-map name the LoRA uses: first position and last target.
struct Name {
  std::size_t position = 0;
  std::string model_key;
  std::int64_t offset = 0, rows = 0;
  bool swap = false;
  const LoraModule* module = nullptr;
};

}  // namespace

LoraFit fit_comfyui(const LoraFile& lora, const LoraNames& names, const LoaderModel& model, bool targets) {
  LoraFit fit;
  fit.loader = LoraLoader::kComfyUI;
  fit.base_arch = model.arch;

  // 1. key_map, filtered to the module names of this LoRA (a name the LoRA has no tensor
  //    for takes nothing in load_lora).
  std::unordered_map<std::string_view, Name> used;
  used.reserve(lora.modules().size() * 2);
  for (const LoraModule& m : lora.modules()) used.emplace(m.name, Name{}).first->second.module = &m;
  std::size_t position = 0;
  comfy_key_map(model, [&](std::string_view name, const ComfyTarget& t) {
    ++position;
    const auto it = used.find(name);
    if (it == used.end()) return;
    Name& n = it->second;
    if (n.position == 0) n.position = position;
    n.model_key.assign(t.model_key);
    n.offset = t.offset;
    n.rows = t.rows;
    n.swap = t.swap;
  });
  std::vector<Name*> order;
  for (auto& [name, n] : used) {
    if (n.position != 0) order.push_back(&n);
  }
  std::sort(order.begin(), order.end(), [](const Name* a, const Name* b) { return a->position < b->position; });

  // 2. load_lora in key_map order.
  std::unordered_set<std::string_view> consumed;
  std::vector<Slot> slots;
  std::unordered_map<std::string, std::size_t> slot_of;
  std::unordered_map<const LoraModule*, Loaded> loaded_of;
  const auto write = [&](const Name& n, bool bias) {
    std::string key;
    std::string model_key = n.model_key;
    if (bias) {
      // "{}.bias".format(to_load[x][:-len(".weight")]): a tuple target slices to ().
      model_key = n.rows > 0 || n.swap ? "()" : n.model_key.substr(0, n.model_key.size() >= 7 ? n.model_key.size() - 7 : 0);
      model_key += ".bias";
      key = model_key;
    } else {
      key = comfy_patch_key(ComfyTarget{n.model_key, n.offset, n.rows, n.swap});
    }
    const auto [it, inserted] = slot_of.try_emplace(key, slots.size());
    if (inserted) {
      Slot s;
      s.patch_key = key;
      s.model_key = model_key;
      s.offset = bias ? 0 : n.offset;
      s.rows = bias ? 0 : n.rows;
      s.swap = !bias && n.swap;
      s.bias = bias;
      slots.push_back(std::move(s));
    }
    slots[it->second].writers.push_back(n.module);
  };
  for (const Name* n : order) {
    Loaded l = load(*n->module);
    if (l.key_error && fit.loader_failures.empty()) {
      fit.loader_failures.push_back(
          {n->module->name, "LoraMissingHalf",
           "ComfyUI's load_lora raises KeyError: '" + *l.key_error + "' (LoRA module '" + n->module->name +
               "' has its first tensor but not this one); the LoRA does not load"});
    }
    for (const std::string_view k : l.keys) consumed.insert(k);
    if (l.weight != WeightPatch::kNone) write(*n, false);
    if (l.bias) write(*n, true);
    loaded_of[n->module] = std::move(l);
  }

  // 3./4. The last writer of each slot applies; the model decides NOT LOADED.
  std::unordered_map<const LoraModule*, ModelPatch> patches;
  std::vector<const LoraModule*> patch_order;
  for (const Slot& s : slots) {
    const LoraModule* winner = s.writers.back();
    for (std::size_t i = 0; i + 1 < s.writers.size(); ++i) {
      if (s.writers[i] != winner) fit.shadowed.push_back({s.writers[i]->name, winner->name, s.patch_key});
    }
    const ModelTensor* t = model.find(s.model_key);
    if (t == nullptr) {
      fit.not_loaded.push_back(s.patch_key);
      continue;
    }
    if (t->kind == ModelTensor::Kind::kMissing) {
      fit.missing_from_file.push_back(s.patch_key);
      continue;
    }
    auto [it, inserted] = patches.try_emplace(winner);
    ModelPatch& p = it->second;
    if (inserted) {
      p.module = winner;
      p.weight = false;
      patch_order.push_back(winner);
    }
    if (s.bias) {
      p.bias = model.view(*t);
    } else {
      p.weight = true;
      p.tensor = model.view(*t);
      p.patch_key = s.patch_key;
      p.offset = s.offset;
      p.rows = s.rows;
      p.swap = s.swap;
    }
  }
  if (fit.loader_failures.empty() && targets) {
    for (const LoraModule* m : patch_order) {
      ModelPatch& p = patches.at(m);
      const Loaded& l = loaded_of.at(m);
      if (!same_kind(l.weight, m->type)) {
        fit.merge_unsupported.push_back({m->name, "LoraUnsupported",
                                         "LoRA module '" + m->name + "' mixes patch kinds; ComfyUI applies only its last one"});
      } else if (m->dora && !l.dora) {
        fit.merge_unsupported.push_back({m->name, "LoraUnsupported",
                                         "LoRA module '" + m->name + "' has a PEFT DoRA magnitude (lora_magnitude_vector) that ComfyUI does not read: it applies the plain LoRA"});
      }
      if (!p.weight) {
        // Only its bias patch survived.
        p.tensor = *p.bias;
      }
      add_matched(fit, p);
    }
  }
  set_loaded(fit, names, consumed);
  if (!fit.loader_failures.empty()) {
    fit.matched.clear();
    fit.tensors_loaded = 0;
  }
  return fit;
}

}  // namespace genscope::detail
