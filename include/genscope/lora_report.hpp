// The LoRA application report of seed 002: baseline, identity changes, weight changes,
// patch analysis, placement and memory impact, success and errors, as one JSON document
// (attachment type "lora_application"; documented in docs/lora.md).
#pragma once

#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "genscope/lora.hpp"
#include "genscope/model_patcher.hpp"
#include "genscope/model_snapshot.hpp"
#include "genscope/run.hpp"

namespace genscope {

/// What an integration observed around one LoRA application (before/after snapshots).
struct LoraApplicationObservation {
  std::filesystem::path lora_path;
  double baseline_unix_seconds = std::numeric_limits<double>::quiet_NaN();  ///< Baseline time.
  ModelSnapshot unet_before, unet_after;
  std::optional<ModelSnapshot> clip_before, clip_after;
  const ModelPatcher* unet_patcher = nullptr;  ///< Patcher after application (patch analysis).
  const ModelPatcher* clip_patcher = nullptr;
  std::optional<LoraFit> fit;  ///< How the LoRA fits the base, when known.
  double memory_allocated_before_bytes = std::numeric_limits<double>::quiet_NaN();
  double memory_allocated_after_bytes = std::numeric_limits<double>::quiet_NaN();
  double memory_reserved_before_bytes = std::numeric_limits<double>::quiet_NaN();
  double memory_reserved_after_bytes = std::numeric_limits<double>::quiet_NaN();
  bool success = false;     ///< The application returned models.
  int models_returned = 0;
  std::vector<std::string> errors;  ///< Failures seen while applying or observing.
};

/// The report (schema "genscope.lora_application/1").
nlohmann::json lora_application_report(const LoraApplicationObservation& observation);
/// The report as a step attachment {"lora_application", <lora file name>, report}.
Attachment lora_application_attachment(const LoraApplicationObservation& observation);

}  // namespace genscope
