// The seed 002 LoRA application report, built from before/after snapshots and the patcher.
#include <cmath>
#include <system_error>

#include "genscope/lora_report.hpp"
#include "genscope/model_diff.hpp"

namespace genscope {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

nlohmann::json baseline_model(const ModelSnapshot& s, double allocated, double reserved, bool clip) {
  return nlohmann::json{{"model_id", s.id},
                        {"class", s.class_name},
                        {"device", s.device},
                        {clip ? "patcher_patches_count" : "patches_count", s.patches_count},
                        {clip ? "patcher_patches_uuid" : "patches_uuid", s.patches_uuid},
                        {"load_device", s.load_device},
                        {"offload_device", s.offload_device},
                        {"memory_allocated", number(allocated)},
                        {"memory_reserved", number(reserved)}};
}

nlohmann::json patch_analysis(const ModelPatcher* patcher) {
  nlohmann::json details = nlohmann::json::object();
  if (patcher == nullptr) return nlohmann::json{{"total_patched_keys", nullptr}, {"patch_details", details}};
  for (const auto& [key, entries] : patcher->patches()) {
    const PatchEntry& first = entries.front();
    const LoraModule* m = first.patch.lora ? first.patch.lora->module(first.patch.module) : nullptr;
    nlohmann::json shapes = nlohmann::json::object();
    if (m != nullptr) {
      for (const auto& [role, tensor] : m->tensors) {
        if (const SafetensorsEntry* e = first.patch.lora->file().find(tensor)) shapes[role] = e->shape;
      }
    }
    details[key] = nlohmann::json{
        {"strength_patch", first.strength_patch},
        {"strength_model", first.strength_model},
        {"patch_type", m != nullptr ? std::string(lora_module_type_name(m->type)) : "unknown"},
        {"module", first.patch.module},
        {"lora_file", first.patch.lora ? first.patch.lora->path().filename().string() : ""},
        {"rank", m != nullptr ? m->rank : 0},
        {"scale", m != nullptr ? m->scale : 1.0},
        {"patch_data_shape", std::move(shapes)},
        {"patch_count", entries.size()}};
  }
  return nlohmann::json{{"total_patched_keys", patcher->patches_count()}, {"patch_details", std::move(details)}};
}

nlohmann::json memory_change(const LoraApplicationObservation& o) {
  return nlohmann::json{
      {"allocated_change_mb", number((o.memory_allocated_after_bytes - o.memory_allocated_before_bytes) / kMiB)},
      {"reserved_change_mb", number((o.memory_reserved_after_bytes - o.memory_reserved_before_bytes) / kMiB)},
      {"current_allocated_mb", number(o.memory_allocated_after_bytes / kMiB)},
      {"current_reserved_mb", number(o.memory_reserved_after_bytes / kMiB)},
      {"allocated_change_bytes", number(o.memory_allocated_after_bytes - o.memory_allocated_before_bytes)},
      {"reserved_change_bytes", number(o.memory_reserved_after_bytes - o.memory_reserved_before_bytes)}};
}

}  // namespace

nlohmann::json lora_application_report(const LoraApplicationObservation& o) {
  nlohmann::json j;
  j["schema"] = "genscope.lora_application/1";
  std::error_code ec;
  const bool exists = std::filesystem::is_regular_file(o.lora_path, ec);
  const auto size = exists ? std::filesystem::file_size(o.lora_path, ec) : 0;
  j["baseline"] = nlohmann::json{
      {"timestamp", number(o.baseline_unix_seconds)},
      {"unet", baseline_model(o.unet_before, o.memory_allocated_before_bytes, o.memory_reserved_before_bytes, false)},
      {"clip", o.clip_before ? baseline_model(*o.clip_before, o.memory_allocated_before_bytes,
                                              o.memory_reserved_before_bytes, true)
                             : nlohmann::json(nullptr)},
      {"lora_file", {{"filename", o.lora_path.filename().string()},
                     {"path", o.lora_path.string()},
                     {"file_exists", exists},
                     {"file_size_bytes", exists ? nlohmann::json(size) : nlohmann::json(nullptr)},
                     {"file_size", exists ? nlohmann::json(static_cast<double>(size) / kMiB) : nlohmann::json(nullptr)}}}};
  j["lora_application_success"] = o.success;
  j["models_returned"] = o.models_returned;
  const ModelDiff unet = diff_snapshots(o.unet_before, o.unet_after);
  j["unet_changes"] = unet.identity;
  j["unet_weight_changes"] = unet.weights;
  j["unet_lora_patches"] = patch_analysis(o.unet_patcher);
  nlohmann::json placement{{"unet", unet.placement}, {"clip", nullptr}};
  if (o.clip_before && o.clip_after) {
    const ModelDiff clip = diff_snapshots(*o.clip_before, *o.clip_after);
    j["clip_changes"] = clip.identity;
    j["clip_weight_changes"] = clip.weights;
    placement["clip"] = clip.placement;
    placement["clip"]["clip_model_device"] = o.clip_after->device;
    placement["clip"]["clip_patcher_load_device"] = o.clip_after->load_device;
    placement["clip"]["clip_patcher_offload_device"] = o.clip_after->offload_device;
  } else {
    j["clip_changes"] = nullptr;
    j["clip_weight_changes"] = nullptr;
  }
  j["clip_lora_patches"] = o.clip_patcher != nullptr ? patch_analysis(o.clip_patcher) : nlohmann::json(nullptr);
  j["placement_changes"] = std::move(placement);
  // The framework's allocator figures are process-wide: one change, reported for both models
  // as the seed does.
  j["memory_impact"] = nlohmann::json{{"unet_memory_change", memory_change(o)}, {"clip_memory_change", memory_change(o)}};
  j["fit"] = o.fit ? nlohmann::json(*o.fit) : nlohmann::json(nullptr);
  j["errors"] = o.errors;
  return j;
}

Attachment lora_application_attachment(const LoraApplicationObservation& o) {
  return Attachment{"lora_application", o.lora_path.filename().string(), lora_application_report(o)};
}

}  // namespace genscope
