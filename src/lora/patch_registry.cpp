// ModelPatcher: per-key patch lists, UUID renewal, clone semantics, merge at load.
#include <algorithm>
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
    // A target whose key is its bias_key is the bias patch alone (the weight did not load).
    const bool bias_only = !target.bias_key.empty() && target.key == target.bias_key;
    if (!bias_only && detail::weight_patch_kind(*m) != detail::WeightPatchKind::kNone &&
        model_.parameters.count(target.key) != 0) {
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

// Where one patch lands inside its key's value: the rows the target names (a chunk or an
// explicit window, LoraKeyTarget::row_window), their shape in the layout ComfyUI holds them
// in, and, when only some rows of the module's delta land here (one fused delta split over
// several file tensors), which rows of it.
struct Region {
  std::size_t offset = 0, size = 0;
  std::vector<std::int64_t> shape;  ///< ComfyUI's layout (transposed when the target is)
  bool slice = false;               ///< Rows [delta_row, delta_row + shape[0]) of dW land here.
  std::int64_t delta_row = 0;
};

[[noreturn]] void misfit(const PatchEntry& entry, const std::string& key, const std::string& what) {
  throw Error("LoraShapeMismatch", "patch of '" + entry.patch.module + "' on '" + key + "': " + what);
}

Region region_of(const std::string& key, const std::vector<std::int64_t>& key_shape, const PatchEntry& entry,
                 const LoraModule& m) {
  const LoraKeyTarget& t = entry.patch.target;
  std::int64_t n = 1;
  for (std::int64_t d : key_shape) n *= d;
  Region r{0, static_cast<std::size_t>(n), key_shape};
  if (entry.patch.bias) return r;
  if (key_shape.empty()) misfit(entry, key, "a scalar has no rows to patch");
  const std::int64_t rows = key_shape[0];
  if (t.rows > 0) {
    if (t.row_offset < 0 || t.row_offset + t.rows > rows) {
      misfit(entry, key, "rows [" + std::to_string(t.row_offset) + ", " + std::to_string(t.row_offset + t.rows) +
                             ") outside its " + std::to_string(rows) + " rows");
    }
  } else if (t.chunks < 1 || t.chunk < 0 || t.chunk >= t.chunks || rows % t.chunks != 0) {
    misfit(entry, key, "chunk " + std::to_string(t.chunk) + " of " + std::to_string(t.chunks) + " does not divide its rows");
  }
  const auto [first, count] = t.row_window(rows);
  const std::size_t cols = rows == 0 ? 0 : static_cast<std::size_t>(n / rows);
  r.offset = static_cast<std::size_t>(first) * cols;
  r.size = static_cast<std::size_t>(count) * cols;
  r.shape[0] = count;
  if (t.transpose) {
    if (r.shape.size() != 2 || count != rows) {
      throw Error("LoraUnsupported", "patch of '" + entry.patch.module + "' on '" + key +
                                         "': only a whole 2-D weight can be patched transposed");
    }
    std::swap(r.shape[0], r.shape[1]);
  }
  r.delta_row = t.delta_row_offset;
  r.slice = t.delta_row_offset != 0 || (!m.delta_shape.empty() && m.delta_shape[0] != r.shape[0]);
  if (r.slice && t.transpose) {
    throw Error("LoraUnsupported", "patch of '" + entry.patch.module + "' on '" + key +
                                       "': a slice of a delta cannot land on a transposed weight");
  }
  return r;
}

// A slice of a fused delta is added row for row: only patches that are a plain sum (adapters
// without DoRA, diff) can be split that way; everything else is refused by name.
void validate_slice(const LoraFile& lora, const LoraModule& m, const PatchEntry& entry, const std::string& key,
                    const Region& r) {
  lora.validate(m);
  const detail::WeightPatchKind kind = detail::weight_patch_kind(m);
  if ((kind != detail::WeightPatchKind::kAdapter && kind != detail::WeightPatchKind::kDiff) ||
      (kind == detail::WeightPatchKind::kAdapter && detail::has_comfy_dora(m))) {
    throw Error("LoraUnsupported", "LoRA module '" + m.name + "': only rows of its patch land on '" + key +
                                       "', and a " + (detail::has_comfy_dora(m) ? "DoRA" : "non-additive") +
                                       " patch cannot be split by rows");
  }
  std::int64_t delta_n = 1;
  for (std::int64_t d : m.delta_shape) delta_n *= d;
  const std::int64_t delta_rows = m.delta_shape.empty() ? 0 : m.delta_shape[0];
  const std::int64_t cols = r.shape[0] == 0 ? 0 : static_cast<std::int64_t>(r.size) / r.shape[0];
  if (delta_rows == 0 || delta_n / delta_rows != cols || r.delta_row < 0 || r.delta_row + r.shape[0] > delta_rows) {
    misfit(entry, key, "rows [" + std::to_string(r.delta_row) + ", " + std::to_string(r.delta_row + r.shape[0]) +
                           ") of its " + std::to_string(delta_rows) + "-row delta do not fit " +
                           std::to_string(r.shape[0]) + " rows of " + std::to_string(cols) + " columns");
  }
}

void transpose(const float* src, float* dst, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) dst[j * rows + i] = src[i * cols + j];
}

const LoraModule& module_of(const std::string& key, const PatchEntry& entry) {
  const LoraModule* m = entry.patch.lora->module(entry.patch.module);
  if (m == nullptr) {
    throw Error("UnknownLoraModule", "patch on '" + key + "' names missing module '" + entry.patch.module + "'");
  }
  return *m;
}

}  // namespace

void ModelPatcher::validate() const {
  for (const auto& [key, entries] : patches_) {
    const std::vector<std::int64_t>& shape = model_.parameters.at(key).shape;
    for (const PatchEntry& entry : entries) {
      const LoraModule& m = module_of(key, entry);
      const Region r = region_of(key, shape, entry, m);
      if (r.slice) {
        validate_slice(*entry.patch.lora, m, entry, key, r);
      } else {
        entry.patch.lora->validate_patch(m, entry.patch.bias, r.shape);
      }
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
    const LoraModule& m = module_of(key, entry);
    const Region r = region_of(key, shape, entry, m);
    std::span<float> w = weight.subspan(r.offset, r.size);
    // comfy/lora.py calculate_weight: narrow to the offset, then weight *= strength_model.
    if (entry.strength_model != 1.0) {
      for (float& x : w) x *= static_cast<float>(entry.strength_model);
    }
    if (entry.patch.bias) {
      entry.patch.lora->patch_bias(m, entry.strength_patch, w);
    } else if (r.slice) {
      validate_slice(*entry.patch.lora, m, entry, key, r);
      const std::vector<float> delta = entry.patch.lora->delta(m);
      const std::size_t from = static_cast<std::size_t>(r.delta_row) * (r.size / static_cast<std::size_t>(r.shape[0]));
      const auto s = static_cast<float>(entry.strength_patch);
      for (std::size_t i = 0; i < w.size(); ++i) w[i] += s * delta[from + i];
    } else if (entry.patch.target.transpose) {
      flipped.resize(w.size());
      transpose(w.data(), flipped.data(), r.shape[1], r.shape[0]);  // stored rows = ComfyUI cols
      entry.patch.lora->patch_weight(m, entry.strength_patch, flipped, r.shape);
      transpose(flipped.data(), w.data(), r.shape[0], r.shape[1]);
    } else {
      entry.patch.lora->patch_weight(m, entry.strength_patch, w, r.shape);
    }
  }
}

}  // namespace genscope
