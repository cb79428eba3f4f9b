// ModelSnapshot: what a model is at one moment (identity, placement, patch state and its
// parameter table), taken from a safetensors file or filled through the API by an
// integration. Plain value; serialises to JSON (attachment type "model_snapshot").
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "genscope/dtype.hpp"

namespace genscope {

/// One parameter (state-dict entry) of a model.
struct ParameterInfo {
  std::vector<std::int64_t> shape;
  DType dtype = DType::kF32;
  std::string device = "cpu";
  std::uint64_t bytes = 0;
  std::optional<std::uint64_t> content_hash;  ///< XXH3-64 of the raw bytes, when computed.
};

/// A model at one moment.
struct ModelSnapshot {
  std::string id;          ///< Object identity (pointer value, file path, ...).
  std::string class_name;  ///< e.g. "UNetModel", "SafetensorsFile".
  std::string device = "cpu";
  std::string load_device;     ///< Where the model computes (ComfyUI load_device).
  std::string offload_device;  ///< Where the model is parked (ComfyUI offload_device).
  std::int64_t patches_count = 0;  ///< Keys with pending patches (ModelPatcher).
  std::string patches_uuid;        ///< ModelPatcher::patches_uuid; empty when unknown.
  std::map<std::string, ParameterInfo> parameters;  ///< State-dict key -> parameter.

  /// Sum of the parameters' bytes.
  std::uint64_t total_bytes() const noexcept;
  /// Sum of the parameters' element counts.
  std::uint64_t total_elements() const noexcept;
};

/// Reads the parameter table of a safetensors file (mmap; hashes every tensor when `hash`).
ModelSnapshot snapshot_from_safetensors(const std::filesystem::path& path, bool hash = false);

/// JSON form of a snapshot (shapes as arrays, dtypes by safetensors name, hashes as hex).
void to_json(nlohmann::json& json, const ModelSnapshot& snapshot);
/// Reads the JSON form back; throws genscope::Error("InvalidSnapshotJson") on bad input.
void from_json(const nlohmann::json& json, ModelSnapshot& snapshot);

}  // namespace genscope
