// How a LoRA fits a base: matched modules, ComfyUI's "lora key not loaded" and "NOT LOADED"
// sets, shape compatibility (conv kernels included) and an architecture verdict.
#include <numeric>
#include <set>
#include <string>

#include <unordered_map>

#include "genscope/lora.hpp"
#include "lora/key_map_builder.hpp"

namespace genscope {
namespace {

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::int64_t numel(const std::vector<std::int64_t>& s) {
  return std::accumulate(s.begin(), s.end(), std::int64_t{1}, std::multiplies<>());
}

// SD1.x and SD2.x LoRAs cannot always be told apart by names; treat them as one family.
int family(ModelArch a) { return a == ModelArch::kSD2 ? static_cast<int>(ModelArch::kSD1) : static_cast<int>(a); }

// Does a delta of shape `d` fit the weight (or chunk) of shape `w`? Conv LoRAs may be
// stored flattened ((out, in·k·k) for LoHa) or with 1×1 trailing dims.
bool shape_fits(const std::vector<std::int64_t>& d, const std::vector<std::int64_t>& w) {
  if (d.empty() || w.empty() || d[0] != w[0]) return false;
  if (numel(d) != numel(w)) return false;
  if (d.size() == w.size()) return d == w;
  return true;  // same rows and element count: a flattened conv kernel
}

}  // namespace

bool LoraFit::fits() const noexcept {
  return !architecture_mismatch && lora_keys_not_loaded.empty() && not_loaded.empty() &&
         shape_mismatches.empty() && !matched.empty();
}

LoraFit fit_lora(const LoraFile& lora, const SafetensorsFile& base, LoraLoader loader) {
  LoraFit fit;
  fit.loader = loader;
  std::vector<std::string> keys;
  keys.reserve(base.entries().size());
  for (const auto& e : base.entries()) keys.push_back(e.name);
  fit.base_keys = keys.size();
  fit.base_arch = detect_model_arch(keys);
  fit.lora_arch = lora.arch();
  // Only the names this LoRA uses are kept from the (large) stream of candidate names.
  std::unordered_map<std::string_view, const LoraModule*> wanted;
  wanted.reserve(lora.modules().size() * 2);
  for (const LoraModule& m : lora.modules()) wanted.emplace(m.name, &m);
  std::unordered_map<std::string_view, LoraKeyTarget> map;
  map.reserve(lora.modules().size() * 2);
  build_lora_key_map(keys, [&](std::string name, const LoraKeyTarget& target) {
    const auto w = wanted.find(name);
    if (w != wanted.end()) map[w->first] = target;
  });
  std::set<std::string> patched;
  for (const LoraModule& m : lora.modules()) {
    const auto it = map.find(m.name);
    if (it == map.end()) {
      fit.lora_keys_not_loaded.push_back(m.name);
      continue;
    }
    const SafetensorsEntry* e = base.find(it->second.key);
    if (e == nullptr) {
      fit.not_loaded.push_back(it->second.key);
      continue;
    }
    fit.matched.emplace_back(m.name, it->second);
    patched.insert(e->name);
    std::vector<std::int64_t> target = e->shape;
    if (it->second.chunks > 1 && !target.empty()) target[0] /= it->second.chunks;
    if (m.type != LoraModuleType::kNorm && !m.delta_shape.empty() && !shape_fits(m.delta_shape, target)) {
      fit.shape_mismatches.push_back(m.name + ": delta " + shape_text(m.delta_shape) + " vs weight '" +
                                     e->name + "' " + shape_text(target));
    }
  }
  fit.base_weights_patched = patched.size();
  const bool known = fit.lora_arch != ModelArch::kUnknown && fit.base_arch != ModelArch::kUnknown;
  if (known && family(fit.lora_arch) != family(fit.base_arch)) {
    fit.architecture_mismatch = true;
    fit.verdict = "this LoRA was trained for " + std::string(model_arch_name(fit.lora_arch)) +
                  "; the base is " + std::string(model_arch_name(fit.base_arch)) + " (evidence: " +
                  lora.arch_evidence() + ")";
  } else if (fit.matched.empty()) {
    fit.architecture_mismatch = !lora.modules().empty();
    fit.verdict = "no LoRA module maps onto this base (" + std::string(model_arch_name(fit.base_arch)) + ")";
  } else if (!fit.shape_mismatches.empty()) {
    fit.verdict = std::to_string(fit.shape_mismatches.size()) +
                  " matched modules do not fit the base weights' shapes";
  } else if (!fit.lora_keys_not_loaded.empty() || !fit.not_loaded.empty()) {
    fit.verdict = "partial fit: " + std::to_string(fit.matched.size()) + " of " +
                  std::to_string(lora.modules().size()) + " modules load";
  } else {
    fit.verdict = "all " + std::to_string(fit.matched.size()) + " modules load onto this " +
                  std::string(model_arch_name(fit.base_arch)) + " base";
  }
  return fit;
}

namespace {

nlohmann::json target_json(const std::string& module, const LoraKeyTarget& target) {
  nlohmann::json t{{"module", module}, {"key", target.key}};
  if (target.chunks > 1) {
    t["chunk"] = target.chunk;
    t["chunks"] = target.chunks;
  }
  if (target.rows > 0) {
    t["row_offset"] = target.row_offset;
    t["rows"] = target.rows;
    if (target.delta_row_offset != 0) t["delta_row_offset"] = target.delta_row_offset;
  }
  if (!target.bias_key.empty()) t["bias_key"] = target.bias_key;
  if (target.transpose) t["transpose"] = true;
  if (target.materialize_identity) {
    t["materialize_identity"] = true;
    t["shape"] = target.shape;
  }
  return t;
}

}  // namespace

void to_json(nlohmann::json& j, const LoraFit& fit) {
  nlohmann::json matched = nlohmann::json::array();
  for (const auto& [module, target] : fit.matched) matched.push_back(target_json(module, target));
  nlohmann::json shadowed = nlohmann::json::array();
  for (const auto& s : fit.shadowed) shadowed.push_back({{"module", s.module}, {"by", s.by}, {"key", s.key}});
  nlohmann::json failures = nlohmann::json::array();
  for (const auto& f : fit.loader_failures) {
    failures.push_back({{"module", f.module}, {"error", f.error}, {"message", f.message}});
  }
  j = nlohmann::json{{"loader", lora_loader_name(fit.loader)},
                     {"lora_architecture", model_arch_name(fit.lora_arch)},
                     {"base_architecture", model_arch_name(fit.base_arch)},
                     {"architecture_mismatch", fit.architecture_mismatch},
                     {"verdict", fit.verdict},
                     {"fits", fit.fits()},
                     {"base_keys", fit.base_keys},
                     {"base_weights_patched", fit.base_weights_patched},
                     {"lora_tensors", fit.lora_tensors},
                     {"tensors_loaded", fit.tensors_loaded},
                     {"matched_count", fit.matched.size()},
                     {"lora_key_not_loaded_count", fit.lora_keys_not_loaded.size()},
                     {"not_loaded_count", fit.not_loaded.size()},
                     {"missing_from_file_count", fit.missing_from_file.size()},
                     {"shadowed_count", fit.shadowed.size()},
                     {"shape_mismatch_count", fit.shape_mismatches.size()},
                     {"matched", std::move(matched)},
                     {"lora_key_not_loaded", fit.lora_keys_not_loaded},
                     {"not_loaded", fit.not_loaded},
                     {"missing_from_file", fit.missing_from_file},
                     {"shadowed", std::move(shadowed)},
                     {"loader_failures", std::move(failures)},
                     {"shape_mismatches", fit.shape_mismatches}};
  if (fit.other_loader) {
    const LoraLoaderComparison& o = *fit.other_loader;
    j["other_loader"] = nlohmann::json{{"loader", lora_loader_name(o.loader)},
                                       {"tensors_loaded", o.tensors_loaded},
                                       {"fails", o.fails},
                                       {"only_other_loads", o.only_other_loads},
                                       {"only_this_loads", o.only_this_loads},
                                       {"summary", o.summary}};
  } else {
    j["other_loader"] = nullptr;
  }
}

}  // namespace genscope
