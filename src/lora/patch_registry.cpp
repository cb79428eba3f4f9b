// ModelPatcher: per-key patch lists, UUID renewal, clone semantics, merge at load.
#include <atomic>
#include <cstdio>
#include <random>

#include "genscope/error.hpp"
#include "genscope/model_patcher.hpp"
#include "lora/lora_delta.hpp"

namespace genscope {
namespace {

std::string next_patcher_id() {
  static std::atomic<std::uint64_t> counter{0};
  return "patcher-" + std::to_string(++counter);
}

}  // namespace

std::string random_uuid() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uint64_t hi = rng(), lo = rng();
  hi = (hi & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;  // version 4
  lo = (lo & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;  // variant 10
  char buf[37];
  std::snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                static_cast<unsigned>((hi >> 16) & 0xffff), static_cast<unsigned>(hi & 0xffff),
                static_cast<unsigned>(lo >> 48), static_cast<unsigned long long>(lo & 0xffffffffffffULL));
  return buf;
}

ModelPatcher::ModelPatcher(ModelSnapshot model)
    : model_(std::move(model)), id_(next_patcher_id()), patches_uuid_(random_uuid()) {}

void ModelPatcher::add_patch(const std::string& key, PatchEntry entry) {
  if (model_.parameters.count(key) == 0) {
    throw Error("UnknownModelKey", "cannot patch '" + key + "': the model has no such key");
  }
  patches_[key].push_back(std::move(entry));
  patches_uuid_ = random_uuid();
}

std::vector<std::string> ModelPatcher::add_patches(const std::shared_ptr<const LoraFile>& lora,
                                                   const LoraFit& fit, double strength_patch,
                                                   double strength_model) {
  std::vector<std::string> added;
  for (const auto& [module, target] : fit.matched) {
    const LoraModule* m = lora->module(module);
    if (m == nullptr) throw Error("UnknownLoraModule", "the fit names module '" + module + "', which the LoRA lacks");
    // ComfyUI load_lora: the weight patch goes to the module's key, diff_b / b_norm to
    // "<module>.bias"; add_patches keeps only keys the model has ("NOT LOADED" otherwise).
    if (detail::weight_patch_kind(*m) != detail::WeightPatchKind::kNone && model_.parameters.count(target.key) != 0) {
      patches_[target.key].push_back(PatchEntry{strength_patch, WeightPatch{lora, module, target, false}, strength_model});
      added.push_back(target.key);
    }
    if (!target.bias_key.empty() && detail::bias_patch_role(*m) != nullptr &&
        model_.parameters.count(target.bias_key) != 0) {
      patches_[target.bias_key].push_back(PatchEntry{strength_patch, WeightPatch{lora, module, target, true}, strength_model});
      added.push_back(target.bias_key);
    }
  }
  if (!added.empty()) patches_uuid_ = random_uuid();
  return added;
}

void ModelPatcher::clear_patches() {
  if (patches_.empty()) return;
  patches_.clear();
  patches_uuid_ = random_uuid();
}

ModelPatcher ModelPatcher::clone() const {
  ModelPatcher copy(*this);
  copy.id_ = next_patcher_id();
  return copy;
}

void ModelPatcher::set_devices(std::string device, std::string load_device, std::string offload_device) {
  model_.device = std::move(device);
  model_.load_device = std::move(load_device);
  model_.offload_device = std::move(offload_device);
}

ModelSnapshot ModelPatcher::snapshot() const {
  ModelSnapshot s = model_;
  s.id = id_;
  if (s.class_name.empty()) s.class_name = "ModelPatcher";
  s.patches_count = static_cast<std::int64_t>(patches_.size());
  s.patches_uuid = patches_uuid_;
  return s;
}

namespace {

// Where one patch lands inside its key's value: the chunk's element range and its shape in
// the layout ComfyUI holds it in.
struct Region {
  std::size_t offset = 0, size = 0;
  std::vector<std::int64_t> shape;  ///< ComfyUI's layout (transposed when the target is)
};

Region region_of(const std::string& key, const std::vector<std::int64_t>& key_shape, const PatchEntry& entry) {
  const LoraKeyTarget& t = entry.patch.target;
  std::int64_t n = 1;
  for (std::int64_t d : key_shape) n *= d;
  Region r{0, static_cast<std::size_t>(n), key_shape};
  if (entry.patch.bias) return r;
  if (t.chunks < 1 || t.chunk < 0 || t.chunk >= t.chunks || key_shape.empty() || key_shape[0] % t.chunks != 0) {
    throw Error("LoraShapeMismatch", "patch of '" + entry.patch.module + "' on '" + key + "': chunk " +
                                         std::to_string(t.chunk) + " of " + std::to_string(t.chunks) +
                                         " does not divide its rows");
  }
  r.shape[0] = key_shape[0] / t.chunks;
  r.size = static_cast<std::size_t>(n / t.chunks);
  r.offset = r.size * static_cast<std::size_t>(t.chunk);
  if (t.transpose) {
    if (r.shape.size() != 2 || t.chunks != 1) {
      throw Error("LoraUnsupported", "patch of '" + entry.patch.module + "' on '" + key +
                                         "': only a whole 2-D weight can be patched transposed");
    }
    std::swap(r.shape[0], r.shape[1]);
  }
  return r;
}

void transpose(const float* src, float* dst, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) dst[j * rows + i] = src[i * cols + j];
}

}  // namespace

void ModelPatcher::validate() const {
  for (const auto& [key, entries] : patches_) {
    const std::vector<std::int64_t>& shape = model_.parameters.at(key).shape;
    for (const PatchEntry& entry : entries) {
      const LoraModule* m = entry.patch.lora->module(entry.patch.module);
      if (m == nullptr) {
        throw Error("UnknownLoraModule", "patch on '" + key + "' names missing module '" + entry.patch.module + "'");
      }
      entry.patch.lora->validate_patch(*m, entry.patch.bias, region_of(key, shape, entry).shape);
    }
  }
}

void ModelPatcher::patch_weight(const std::string& key, std::span<float> weight) const {
  const auto it = patches_.find(key);
  if (it == patches_.end()) return;
  const std::vector<std::int64_t>& shape = model_.parameters.at(key).shape;
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  if (weight.size() != static_cast<std::size_t>(n)) {
    throw Error("LoraShapeMismatch", "'" + key + "' holds " + std::to_string(weight.size()) +
                                         " elements, its shape says " + std::to_string(n));
  }
  std::vector<float> flipped;
  for (const PatchEntry& entry : it->second) {
    const LoraModule* m = entry.patch.lora->module(entry.patch.module);
    if (m == nullptr) {
      throw Error("UnknownLoraModule", "patch on '" + key + "' names missing module '" + entry.patch.module + "'");
    }
    const Region r = region_of(key, shape, entry);
    std::span<float> w = weight.subspan(r.offset, r.size);
    // comfy/lora.py calculate_weight: narrow to the offset, then weight *= strength_model.
    if (entry.strength_model != 1.0) {
      for (float& x : w) x *= static_cast<float>(entry.strength_model);
    }
    if (entry.patch.bias) {
      entry.patch.lora->patch_bias(*m, entry.strength_patch, w);
    } else if (entry.patch.target.transpose) {
      flipped.resize(w.size());
      transpose(w.data(), flipped.data(), r.shape[1], r.shape[0]);  // stored rows = ComfyUI cols
      entry.patch.lora->patch_weight(*m, entry.strength_patch, flipped, r.shape);
      transpose(flipped.data(), w.data(), r.shape[0], r.shape[1]);
    } else {
      entry.patch.lora->patch_weight(*m, entry.strength_patch, w, r.shape);
    }
  }
}

}  // namespace genscope
