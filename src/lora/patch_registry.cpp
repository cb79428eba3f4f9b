// ModelPatcher: per-key patch lists, UUID renewal, clone semantics, merge at load.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <random>

#include "genscope/error.hpp"
#include "genscope/model_patcher.hpp"

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
    if (model_.parameters.count(target.key) == 0) continue;  // ComfyUI: "NOT LOADED"
    patches_[target.key].push_back(PatchEntry{strength_patch, WeightPatch{lora, module, target}, strength_model});
    added.push_back(target.key);
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

void ModelPatcher::patch_weight(const std::string& key, std::span<float> weight) const {
  const auto it = patches_.find(key);
  if (it == patches_.end()) return;
  for (const PatchEntry& entry : it->second) {
    if (entry.strength_model != 1.0) {
      for (float& w : weight) w *= static_cast<float>(entry.strength_model);
    }
    const LoraModule* m = entry.patch.lora->module(entry.patch.module);
    if (m == nullptr) {
      throw Error("UnknownLoraModule", "patch on '" + key + "' names missing module '" + entry.patch.module + "'");
    }
    // The rows the target names (a chunk or an explicit window, LoraKeyTarget::row_window).
    const auto& shape = model_.parameters.at(key).shape;
    const std::int64_t rows = shape.empty() ? 1 : std::max<std::int64_t>(shape[0], 1);
    const std::size_t cols = weight.size() / static_cast<std::size_t>(rows);
    const auto [first, count] = entry.patch.target.row_window(rows);
    const std::span<float> window = weight.subspan(static_cast<std::size_t>(first) * cols, static_cast<std::size_t>(count) * cols);
    const bool slice = entry.patch.target.delta_row_offset != 0 ||
                       (!m->delta_shape.empty() && m->delta_shape[0] != count);
    if (!slice) {
      entry.patch.lora->add_delta(*m, entry.strength_patch, window);
    } else {
      // Only some rows of the module's delta land here (a fused delta split over tensors).
      const std::vector<float> delta = entry.patch.lora->delta(*m);
      const std::size_t from = static_cast<std::size_t>(entry.patch.target.delta_row_offset) * cols;
      for (std::size_t i = 0; i < window.size() && from + i < delta.size(); ++i) {
        window[i] += static_cast<float>(entry.strength_patch) * delta[from + i];
      }
    }
  }
}

}  // namespace genscope
