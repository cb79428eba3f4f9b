// Streaming merge: W <- W + strength·scale·dW per matched weight, in float32, cast back to
// W's dtype, written through write_safetensors (atomic). Everything that can make the merge
// wrong is checked before the first byte is written.
#include <cstring>
#include <string>

#include "genscope/error.hpp"
#include "genscope/lora.hpp"
#include "genscope/model_patcher.hpp"
#include "model/float_convert.hpp"

namespace genscope {

LoraMergeResult merge_lora(const std::filesystem::path& base_path, const std::filesystem::path& lora_path,
                           const std::filesystem::path& out, double strength) {
  const SafetensorsFile base = SafetensorsFile::open(base_path);
  const std::shared_ptr<const LoraFile> lora = LoraFile::open(lora_path, /*norms=*/false);
  LoraMergeResult result;
  result.fit = fit_lora(*lora, base);
  const LoraFit& fit = result.fit;
  if (fit.architecture_mismatch) throw Error("LoraArchitectureMismatch", fit.verdict);
  for (const auto& [name, target] : fit.matched) lora->validate(*lora->module(name));
  if (!fit.shape_mismatches.empty()) {
    throw Error("LoraShapeMismatch", "LoRA module " + fit.shape_mismatches.front() +
                                         (fit.shape_mismatches.size() > 1
                                              ? " (and " + std::to_string(fit.shape_mismatches.size() - 1) + " more)"
                                              : std::string()));
  }
  if (fit.matched.empty()) throw Error("LoraNothingToMerge", "no module of '" + lora_path.string() + "' maps onto the base");

  ModelSnapshot model;
  model.id = base_path.string();
  model.class_name = "SafetensorsFile";
  for (const auto& e : base.entries()) model.parameters[e.name] = ParameterInfo{e.shape, e.dtype, "cpu", e.nbytes(), {}};
  ModelPatcher patcher(std::move(model));
  const auto added = patcher.add_patches(lora, fit, strength);
  for (const auto& [key, entries] : patcher.patches()) {
    const SafetensorsEntry* e = base.find(key);
    if (!dtype_is_float(e->dtype) || !detail::convertible(e->dtype)) {
      throw Error("UnsupportedDType", "cannot merge into '" + key + "' of dtype " + std::string(dtype_name(e->dtype)));
    }
    result.patched_bytes += e->nbytes();
  }
  result.modules_merged = added.size();
  result.weights_patched = patcher.patches_count();

  std::vector<SafetensorsSource> sources;
  sources.reserve(base.entries().size());
  for (const SafetensorsEntry& e : base.entries()) {
    SafetensorsSource s;
    s.name = e.name;
    s.dtype = e.dtype;
    s.shape = e.shape;
    const SafetensorsEntry* entry = &e;
    if (patcher.patches().count(e.name) == 0) {
      s.fill = [&base, entry](std::span<std::byte> dst) { std::memcpy(dst.data(), base.bytes(*entry).data(), dst.size()); };
    } else {
      s.fill = [&base, &patcher, entry](std::span<std::byte> dst) {
        std::vector<float> w = detail::tensor_to_f32(base, *entry);
        patcher.patch_weight(entry->name, w);
        detail::convert_from_f32(w.data(), w.size(), entry->dtype, dst.data());
      };
    }
    result.bytes_written += e.nbytes();
    sources.push_back(std::move(s));
  }
  std::map<std::string, std::string> metadata = base.metadata();
  metadata["genscope.merged_lora"] = lora_path.filename().string();
  metadata["genscope.merged_strength"] = std::to_string(strength);
  write_safetensors(out, sources, metadata);
  return result;
}

}  // namespace genscope
