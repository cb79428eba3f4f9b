// Streaming merge: every patch of fit.matched applied as ComfyUI's calculate_weight does, in
// float32, cast back to the tensor's dtype, written through write_safetensors (atomic).
// Everything that can make the merge wrong is checked before the first byte is written.
#include <algorithm>
#include <cstring>
#include <memory>
#include <set>
#include <string>

#include "genscope/error.hpp"
#include "genscope/lora.hpp"
#include "genscope/model_patcher.hpp"
#include "lora/lora_delta.hpp"
#include "lora/matmul.hpp"
#include "lora/merge_kernel.hpp"
#include "model/float_convert.hpp"

namespace genscope {
namespace {

// The fused path handles the common case: every patch on the weight is a plain up·down LoRA
// (no LoCon mid, no DoRA) on the whole, untransposed weight with strength_model 1, its whole
// delta landing there. Anything else (chunks, row windows, slices of a fused delta,
// transposed or identity weights, biases) takes ModelPatcher::patch_weight on a float32 copy.
std::shared_ptr<const std::vector<detail::PreparedLora>> prepare_plain(const std::vector<PatchEntry>& entries,
                                                                       const SafetensorsEntry& weight) {
  auto out = std::make_shared<std::vector<detail::PreparedLora>>();
  for (const PatchEntry& p : entries) {
    const LoraModule* m = p.patch.lora->module(p.patch.module);
    const LoraKeyTarget& t = p.patch.target;
    if (m == nullptr || p.patch.bias || t.transpose || t.chunks != 1 || t.rows > 0 || t.delta_row_offset != 0 ||
        t.materialize_identity || p.strength_model != 1.0 || detail::weight_patch_kind(*m) != detail::WeightPatchKind::kAdapter ||
        m->type != LoraModuleType::kLora || m->tensors.count("mid") != 0 || detail::has_comfy_dora(*m) ||
        weight.shape.empty() || m->delta_shape.empty() || m->delta_shape[0] != weight.shape[0]) {
      return nullptr;
    }
    const SafetensorsFile& f = p.patch.lora->file();
    detail::PreparedLora prepared;
    prepared.up = detail::tensor_to_f32(f, *f.find(m->tensors.at("up")));
    prepared.down = detail::tensor_to_f32(f, *f.find(m->tensors.at("down")));
    prepared.rank = m->rank;
    prepared.coefficient = static_cast<float>(p.strength_patch * m->scale);
    out->push_back(std::move(prepared));
  }
  return out;
}

}  // namespace

LoraMergeResult merge_lora(const std::filesystem::path& base_path, const std::filesystem::path& lora_path,
                           const std::filesystem::path& out, double strength, LoraLoader loader) {
  const SafetensorsFile base = SafetensorsFile::open(base_path);
  const std::shared_ptr<const LoraFile> lora = LoraFile::open(lora_path, /*norms=*/false);
  LoraMergeResult result;
  result.fit = fit_lora(*lora, base, loader, /*compare_other_loader=*/false);
  const LoraFit& fit = result.fit;
  if (fit.architecture_mismatch) throw Error("LoraArchitectureMismatch", fit.verdict);
  // The loader itself fails on these (ComfyUI: KeyError while loading): nothing to imitate.
  if (!fit.loader_failures.empty()) {
    const LoraLoaderFailure& f = fit.loader_failures.front();
    throw Error(f.error, f.message);
  }
  // What the loader applies in a way this file cannot reproduce (or, for a PEFT DoRA
  // magnitude, what it silently ignores): refused by name rather than merged differently.
  if (!fit.merge_unsupported.empty()) {
    const LoraLoaderFailure& f = fit.merge_unsupported.front();
    throw Error(f.error, f.message);
  }
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
  // Weights the loader patches after initialising them to the identity (ComfyUI's CLIP
  // text_projection, comfy/sd1_clip.py): written as new tensors, in the dtype of their tower.
  std::vector<std::pair<std::string, ParameterInfo>> identities;
  for (const auto& [name, target] : fit.matched) {
    if (!target.materialize_identity || model.parameters.count(target.key) != 0) continue;
    if (target.shape.size() != 2 || target.shape[0] != target.shape[1] || target.shape[0] <= 0) {
      throw Error("LoraShapeMismatch", "LoRA module '" + name + "': identity weight '" + target.key +
                                           "' needs a square 2-D shape");
    }
    const std::string tower = target.key.substr(0, target.key.rfind("text_projection"));
    DType dtype = DType::kF32;
    for (const auto& e : base.entries()) {
      if (e.name.rfind(tower, 0) == 0 && dtype_is_float(e.dtype) && detail::convertible(e.dtype)) {
        dtype = e.dtype;
        break;
      }
    }
    const ParameterInfo info{target.shape, dtype, "cpu",
                             static_cast<std::uint64_t>(target.shape[0] * target.shape[1]) * dtype_size(dtype), {}};
    model.parameters[target.key] = info;
    identities.emplace_back(target.key, info);
  }
  ModelPatcher patcher(std::move(model));
  // Exactly fit.matched, as ComfyUI's add_patches applies it: weights, biases, chunks,
  // transposed targets.
  patcher.add_patches(lora, fit, strength);
  std::set<std::string> modules;
  for (const auto& [key, entries] : patcher.patches()) {
    for (const PatchEntry& p : entries) modules.insert(p.patch.module);
    const SafetensorsEntry* e = base.find(key);
    if (e == nullptr) continue;  // a materialised identity (counted where it is written)
    if (!dtype_is_float(e->dtype) || !detail::convertible(e->dtype)) {
      throw Error("UnsupportedDType", "cannot merge into '" + key + "' of dtype " + std::string(dtype_name(e->dtype)));
    }
    result.patched_bytes += e->nbytes();
  }
  patcher.validate();  // shapes of every patch (DoRA scales, biases, chunks) before writing
  result.modules_merged = modules.size();
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
      s.part_bytes = detail::kMergePartBytes;
      s.fill_part = [&base, entry](std::uint64_t offset, std::span<std::byte> part) {
        std::memcpy(part.data(), base.bytes(*entry).data() + offset, part.size());
      };
    } else if (auto prepared = prepare_plain(patcher.patches().at(e.name), e)) {
      // Whole rows per part, each merged while the writer's buffer is still in cache.
      const std::int64_t rows = e.shape.empty() ? 1 : e.shape[0];
      const std::int64_t cols = static_cast<std::int64_t>(e.nbytes() / dtype_size(e.dtype)) / std::max<std::int64_t>(rows, 1);
      const std::uint64_t row_bytes = static_cast<std::uint64_t>(cols) * dtype_size(e.dtype);
      s.part_bytes = row_bytes == 0 ? detail::kMergePartBytes
                                    : std::max<std::uint64_t>(1, detail::kMergePartBytes / row_bytes) * row_bytes;
      s.fill_part = [&base, entry, prepared, cols, row_bytes](std::uint64_t offset, std::span<std::byte> part) {
        const auto first = static_cast<std::int64_t>(offset / row_bytes);
        const auto n = static_cast<std::int64_t>(part.size() / row_bytes);
        detail::merge_rows(base.bytes(*entry).data(), part.data(), entry->dtype, first, first + n, cols, *prepared,
                           detail::merge_threads(n, cols));
      };
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
  for (const auto& [key, info] : identities) {
    SafetensorsSource s;
    s.name = key;
    s.dtype = info.dtype;
    s.shape = info.shape;
    const std::string* name = &key;
    const ParameterInfo* p = &info;
    s.fill = [&patcher, name, p](std::span<std::byte> dst) {
      const std::int64_t n = p->shape[0];
      std::vector<float> w(static_cast<std::size_t>(n * n), 0.0f);
      for (std::int64_t i = 0; i < n; ++i) w[static_cast<std::size_t>(i * n + i)] = 1.0f;
      patcher.patch_weight(*name, w);
      detail::convert_from_f32(w.data(), w.size(), p->dtype, dst.data());
    };
    result.bytes_written += info.bytes;
    result.patched_bytes += info.bytes;
    sources.push_back(std::move(s));
  }
  std::map<std::string, std::string> metadata = base.metadata();
  metadata["genscope.merged_lora"] = lora_path.filename().string();
  metadata["genscope.merged_strength"] = std::to_string(strength);
  // Every product runs on its caller's thread while the file is written: the fused blocks on
  // merge_rows' threads, the rest (small: LoCon mid, LoHa, LoKr, DoRA, chunks, windows,
  // identities) on this one.
  const detail::SingleThreadedBlas blas_on_callers;
  write_safetensors(out, sources, metadata);
  return result;
}

}  // namespace genscope
