// ModelPatcher: ComfyUI's patch registry, as genscope models it (domain.md §4). Patches are
// recorded per state-dict key as (strength_patch, patch, strength_model); nothing is merged
// until load (patch_weight), every change renews patches_uuid, clone() copies the lists and
// the UUID. Seed 002's patches_count / patches_uuid / model_cloned / uuid_changed are read
// from snapshot().
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "genscope/lora.hpp"
#include "genscope/model_snapshot.hpp"

namespace genscope {

/// One patch: a LoRA module (any type) landing on a base weight (or a chunk of it).
struct WeightPatch {
  std::shared_ptr<const LoraFile> lora;
  std::string module;    ///< Module name in `lora`.
  LoraKeyTarget target;  ///< Where it lands.
  bool bias = false;     ///< Patches target.bias_key with the module's diff_b / b_norm.
};

/// (strength_patch, patch, strength_model) as ComfyUI stores it.
struct PatchEntry {
  double strength_patch = 1.0;
  WeightPatch patch;
  double strength_model = 1.0;
};

/// A model plus its pending patches.
class ModelPatcher {
 public:
  /// Wraps a model described by its snapshot (parameter table, devices); new object id.
  explicit ModelPatcher(ModelSnapshot model);

  /// Adds one patch to `key` (must be a model key); renews the UUID.
  void add_patch(const std::string& key, PatchEntry entry);
  /// Adds every matched module of `fit` (ComfyUI add_patches): a patch on its weight key and,
  /// for diff_b / b_norm, one on its bias_key; returns the keys patched.
  std::vector<std::string> add_patches(const std::shared_ptr<const LoraFile>& lora, const LoraFit& fit,
                                       double strength_patch, double strength_model = 1.0);
  /// Removes every patch; renews the UUID when there were any.
  void clear_patches();
  /// A new patcher (new object id) with copied patch lists and the same UUID.
  ModelPatcher clone() const;

  /// Key -> patch list.
  const std::map<std::string, std::vector<PatchEntry>>& patches() const noexcept { return patches_; }
  /// Number of keys with patches.
  std::size_t patches_count() const noexcept { return patches_.size(); }
  /// Fresh random UUID (RFC 4122 v4 text) after every change.
  const std::string& patches_uuid() const noexcept { return patches_uuid_; }
  /// Object identity ("patcher-<n>"), different for every clone.
  const std::string& id() const noexcept { return id_; }
  /// Sets where the model computes / is parked.
  void set_devices(std::string device, std::string load_device, std::string offload_device);
  /// The model as a snapshot, with id, patches_count and patches_uuid filled in.
  ModelSnapshot snapshot() const;

  /// Checks every patch against the shape of its key (LoraShapeMismatch, LoraMissingHalf,
  /// LoraNaN, ...) without changing anything: what patch_weight would refuse.
  void validate() const;
  /// Applies the patches of `key` to its float32 value in place (ComfyUI calculate_weight):
  /// for each entry, on the target's rows (LoraKeyTarget::row_window: a chunk or an offset
  /// window), W *= strength_model, then the module's patch at strength_patch
  /// (LoraFile::patch_weight / patch_bias; transposed targets are patched in the layout
  /// ComfyUI holds them in and transposed back; with delta_row_offset only those rows of an
  /// additive patch's dW are added).
  void patch_weight(const std::string& key, std::span<float> weight) const;

 private:
  ModelSnapshot model_;
  std::string id_;
  std::string patches_uuid_;
  std::map<std::string, std::vector<PatchEntry>> patches_;
};

/// A random RFC 4122 version-4 UUID.
std::string random_uuid();

}  // namespace genscope
