// A ComfyUI-like model patcher for the reference pipeline's denoiser.
//
// As in ComfyUI (comfy/model_patcher.py): applying a LoRA = clone() + add_patches(); adding
// patches merges nothing and renews patches_uuid; weights are merged when the model is
// loaded (patch_model), W <- W + strength * (alpha / rank) * (up @ down) in float32, with
// the original weight kept as a backup.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "networks.hpp"

namespace genscope::detail {

/// One patch of one model key (a kohya LoRA pair).
struct LoraPatch {
  double strength_patch = 1.0;
  std::string lora_module;  ///< e.g. "lora_unet_down_0_attn_attn1_to_q"
  at::Tensor up;            ///< (out, rank)
  at::Tensor down;          ///< (rank, in)
  double alpha = 0;         ///< 0 = missing (scale 1)
  double strength_model = 1.0;
};

/// Result of mapping a LoRA file onto a model.
struct LoraMapping {
  std::map<std::string, LoraPatch> patches;  ///< model key -> patch
  std::vector<std::string> not_loaded;       ///< "lora key not loaded: <key>"
  std::size_t lora_modules = 0;
};

/// Maps kohya keys (lora_unet_<key _>) onto the model's keys.
LoraMapping map_kohya_lora(const Weights& lora, const Weights& model, double strength);

/// The patcher: shares the model weights with its clones, owns its patch list.
class ModelPatcher {
 public:
  ModelPatcher(std::shared_ptr<Weights> model, std::string class_name, std::string device);
  /// A new patcher around the same weights, same patches and UUID.
  ModelPatcher clone() const;
  /// Adds patches (merging nothing); renews the UUID when any were added. Returns keys.
  std::vector<std::string> add_patches(const std::map<std::string, LoraPatch>& patches);
  /// Merges every patch into the shared weights, backing the originals up.
  void patch_model();
  /// Restores the backed-up weights.
  void unpatch_model();

  const std::string& patches_uuid() const { return uuid_; }
  std::size_t patch_count() const { return patches_.size(); }
  const std::map<std::string, std::vector<LoraPatch>>& patches() const { return patches_; }
  const std::string& class_name() const { return class_name_; }
  const std::string& load_device() const { return load_device_; }
  const std::string& offload_device() const { return offload_device_; }
  /// A stable id of the shared model object (like Python's id()).
  std::uintptr_t model_id() const { return reinterpret_cast<std::uintptr_t>(model_.get()); }
  const Weights& weights() const { return *model_; }
  /// The patcher's own identity (differs between clones).
  std::uintptr_t patcher_id() const { return reinterpret_cast<std::uintptr_t>(this); }

 private:
  std::shared_ptr<Weights> model_;
  std::string class_name_;
  std::string load_device_;
  std::string offload_device_ = "cpu";
  std::map<std::string, std::vector<LoraPatch>> patches_;
  std::map<std::string, at::Tensor> backup_;
  std::string uuid_;
};

/// Per-key fingerprint of weights (xxh3 of bytes, shape, dtype, device).
struct WeightFingerprint {
  std::uint64_t hash = 0;
  std::vector<std::int64_t> shape;
  std::string dtype;
  std::string device;
};
std::map<std::string, WeightFingerprint> fingerprint(const Weights& w);

/// The seed-002 style "weight modifications" section: keys added/removed/common/changed and
/// per-key shape/dtype/device changes, comparing two fingerprints.
nlohmann::json weight_changes(const std::map<std::string, WeightFingerprint>& before,
                              const std::map<std::string, WeightFingerprint>& after);

/// A random version-4 UUID string.
std::string new_uuid();

}  // namespace genscope::detail
