// Differences between two model states (seed 002 §2, §3, §5): identity, weights, placement.
// diff_safetensors() streams both files tensor by tensor (mmap, f16/bf16 -> f32 on the fly)
// so multi-GB checkpoints are compared without loading them whole.
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "genscope/dtype.hpp"
#include "genscope/model_snapshot.hpp"

namespace genscope {

/// Identity changes: was the model cloned, did its class or patch set change.
struct IdentityDiff {
  bool model_cloned = false;   ///< Different object ids.
  bool class_changed = false;
  std::int64_t patches_added = 0;  ///< modified_patch_count - original_patch_count.
  bool uuid_changed = false;
  std::int64_t original_patch_count = 0;
  std::int64_t modified_patch_count = 0;
};

/// How one key present in both models changed.
struct WeightChange {
  std::string key;
  bool shape_changed = false;
  bool dtype_changed = false;
  bool device_changed = false;
  std::vector<std::int64_t> original_shape;
  std::vector<std::int64_t> modified_shape;
  DType original_dtype = DType::kF32;
  DType modified_dtype = DType::kF32;
  /// 1 changed, 0 same, -1 unknown (no hashes and no data).
  int value_changed = -1;
  double delta_norm = std::numeric_limits<double>::quiet_NaN();     ///< ||W' - W||_F
  double relative_delta = std::numeric_limits<double>::quiet_NaN();  ///< ||W' - W|| / ||W||
};

/// State-dict changes.
struct WeightDiff {
  std::vector<std::string> keys_added;    ///< In the modified model only.
  std::vector<std::string> keys_removed;  ///< In the original model only.
  std::size_t keys_common = 0;            ///< In both.
  std::size_t total_keys_original = 0;
  std::size_t total_keys_modified = 0;
  std::size_t values_changed = 0;         ///< Common keys whose values differ.
  std::vector<WeightChange> changes;      ///< Common keys with any change, sorted by key.
};

/// Placement changes (model, load and offload devices).
struct PlacementDiff {
  bool model_device_changed = false;
  bool load_device_changed = false;
  bool offload_device_changed = false;
  std::string original_device, modified_device;
  std::string original_load_device, modified_load_device;
  std::string original_offload_device, modified_offload_device;
};

/// All three diffs.
struct ModelDiff {
  IdentityDiff identity;
  WeightDiff weights;
  PlacementDiff placement;
};

/// Diff of two snapshots; value changes come from content hashes when both have them.
ModelDiff diff_snapshots(const ModelSnapshot& original, const ModelSnapshot& modified);
/// Diff of two safetensors files, streaming: exact value comparison and ||W'-W|| per key.
ModelDiff diff_safetensors(const std::filesystem::path& original,
                           const std::filesystem::path& modified);

/// JSON forms (seed 002 field names).
void to_json(nlohmann::json& json, const IdentityDiff& diff);
void to_json(nlohmann::json& json, const WeightDiff& diff);
void to_json(nlohmann::json& json, const PlacementDiff& diff);
void to_json(nlohmann::json& json, const ModelDiff& diff);

}  // namespace genscope
