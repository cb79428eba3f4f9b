// ModelPatcher, kohya key mapping and weight fingerprints.
#include "patcher.hpp"

#include <random>
#include <set>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace genscope::detail {

std::string new_uuid() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  const std::uint64_t a = rng(), b = rng();
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08x-%04x-4%03x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0x0fff),
                static_cast<unsigned>(((b >> 48) & 0x3fff) | 0x8000),
                static_cast<unsigned long long>(b & 0xffffffffffffULL));
  return buf;
}

LoraMapping map_kohya_lora(const Weights& lora, const Weights& model, double strength) {
  LoraMapping out;
  std::map<std::string, std::string> module_to_key;
  for (const auto& [key, t] : model) module_to_key.emplace(kohya_module_name(key), key);
  std::set<std::string> used;
  for (const auto& [key, t] : lora) {
    const auto dot = key.find('.');
    const std::string module = key.substr(0, dot);
    const std::string suffix = dot == std::string::npos ? std::string() : key.substr(dot + 1);
    if (suffix == "lora_down.weight") ++out.lora_modules;
    auto it = module_to_key.find(module);
    if (it == module_to_key.end() ||
        (suffix != "lora_down.weight" && suffix != "lora_up.weight" && suffix != "alpha")) {
      out.not_loaded.push_back(key);
      continue;
    }
    LoraPatch& p = out.patches[it->second];
    p.lora_module = module;
    p.strength_patch = strength;
    if (suffix == "lora_down.weight") p.down = t;
    if (suffix == "lora_up.weight") p.up = t;
    if (suffix == "alpha") p.alpha = t.item<double>();
  }
  for (auto it = out.patches.begin(); it != out.patches.end();) {
    if (!it->second.up.defined() || !it->second.down.defined()) {
      out.not_loaded.push_back(it->second.lora_module + " (incomplete pair)");
      it = out.patches.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

ModelPatcher::ModelPatcher(std::shared_ptr<Weights> model, std::string class_name,
                           std::string device)
    : model_(std::move(model)),
      class_name_(std::move(class_name)),
      load_device_(std::move(device)),
      uuid_(new_uuid()) {}

ModelPatcher ModelPatcher::clone() const {
  ModelPatcher c(model_, class_name_, load_device_);
  c.offload_device_ = offload_device_;
  c.patches_ = patches_;
  c.uuid_ = uuid_;
  return c;
}

std::vector<std::string> ModelPatcher::add_patches(
    const std::map<std::string, LoraPatch>& patches) {
  std::vector<std::string> keys;
  for (const auto& [key, patch] : patches) {
    if (model_->count(key) == 0) continue;
    patches_[key].push_back(patch);
    keys.push_back(key);
  }
  if (!keys.empty()) uuid_ = new_uuid();
  return keys;
}

void ModelPatcher::patch_model() {
  for (const auto& [key, list] : patches_) {
    at::Tensor& w = model_->at(key);
    if (backup_.count(key) == 0) backup_[key] = w.clone();
    at::Tensor merged = w.to(at::kFloat);
    for (const LoraPatch& p : list) {
      const double rank = static_cast<double>(p.down.size(0));
      const double scale = p.alpha > 0 ? p.alpha / rank : 1.0;
      at::Tensor delta =
          at::matmul(p.up.to(at::kFloat).flatten(1), p.down.to(at::kFloat).flatten(1));
      merged = merged + delta.reshape(w.sizes()) * (p.strength_patch * p.strength_model * scale);
    }
    w = merged.to(w.scalar_type());
  }
}

void ModelPatcher::unpatch_model() {
  for (auto& [key, w] : backup_) model_->at(key) = w;
  backup_.clear();
}

std::map<std::string, WeightFingerprint> fingerprint(const Weights& w) {
  std::map<std::string, WeightFingerprint> out;
  for (const auto& [key, t] : w) {
    at::Tensor c = t.contiguous().cpu();
    WeightFingerprint f;
    f.hash = XXH3_64bits(c.data_ptr(), c.numel() * c.element_size());
    f.shape.assign(t.sizes().begin(), t.sizes().end());
    f.dtype = std::string(c10::toString(t.scalar_type()));
    f.device = t.device().str();
    out.emplace(key, std::move(f));
  }
  return out;
}

nlohmann::json weight_changes(const std::map<std::string, WeightFingerprint>& before,
                              const std::map<std::string, WeightFingerprint>& after) {
  nlohmann::json added = nlohmann::json::array(), removed = nlohmann::json::array(),
                 changed = nlohmann::json::array(), per_key = nlohmann::json::object();
  std::size_t common = 0;
  for (const auto& [key, f] : after) {
    if (before.count(key) == 0) added.push_back(key);
  }
  for (const auto& [key, b] : before) {
    auto it = after.find(key);
    if (it == after.end()) {
      removed.push_back(key);
      continue;
    }
    ++common;
    const WeightFingerprint& a = it->second;
    if (a.hash != b.hash || a.shape != b.shape || a.dtype != b.dtype || a.device != b.device) {
      changed.push_back(key);
      per_key[key] = {{"shape_changed", a.shape != b.shape},
                      {"dtype_changed", a.dtype != b.dtype},
                      {"device_changed", a.device != b.device},
                      {"values_changed", a.hash != b.hash},
                      {"original_shape", b.shape},
                      {"modified_shape", a.shape}};
    }
  }
  return {{"keys_added", added},
          {"keys_removed", removed},
          {"keys_common", common},
          {"keys_changed", changed},
          {"total_keys_original", before.size()},
          {"total_keys_modified", after.size()},
          {"changes", per_key}};
}

}  // namespace genscope::detail
