// Identity, weight and placement diffs; the streaming file diff computes ||W'-W|| and ||W||
// tensor by tensor in fixed-size float32 chunks, so memory stays O(chunk) for any file size.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "genscope/model_diff.hpp"
#include "genscope/safetensors.hpp"
#include "model/float_convert.hpp"

namespace genscope {
namespace {

IdentityDiff identity_diff(const ModelSnapshot& a, const ModelSnapshot& b) {
  IdentityDiff d;
  d.model_cloned = a.id != b.id;
  d.class_changed = a.class_name != b.class_name;
  d.original_patch_count = a.patches_count;
  d.modified_patch_count = b.patches_count;
  d.patches_added = b.patches_count - a.patches_count;
  d.uuid_changed = a.patches_uuid != b.patches_uuid;
  return d;
}

PlacementDiff placement_diff(const ModelSnapshot& a, const ModelSnapshot& b) {
  PlacementDiff d;
  d.original_device = a.device;
  d.modified_device = b.device;
  d.original_load_device = a.load_device;
  d.modified_load_device = b.load_device;
  d.original_offload_device = a.offload_device;
  d.modified_offload_device = b.offload_device;
  d.model_device_changed = a.device != b.device;
  d.load_device_changed = a.load_device != b.load_device;
  d.offload_device_changed = a.offload_device != b.offload_device;
  return d;
}

// Key sets and per-key metadata changes; `value` decides value_changed for common keys.
template <class ValueFn>
WeightDiff weight_diff(const ModelSnapshot& a, const ModelSnapshot& b, ValueFn&& value) {
  WeightDiff d;
  d.total_keys_original = a.parameters.size();
  d.total_keys_modified = b.parameters.size();
  for (const auto& [k, p] : a.parameters) {
    if (b.parameters.count(k) == 0) d.keys_removed.push_back(k);
  }
  for (const auto& [k, q] : b.parameters) {
    const auto it = a.parameters.find(k);
    if (it == a.parameters.end()) {
      d.keys_added.push_back(k);
      continue;
    }
    ++d.keys_common;
    const ParameterInfo& p = it->second;
    WeightChange c;
    c.key = k;
    c.original_shape = p.shape;
    c.modified_shape = q.shape;
    c.original_dtype = p.dtype;
    c.modified_dtype = q.dtype;
    c.shape_changed = p.shape != q.shape;
    c.dtype_changed = p.dtype != q.dtype;
    c.device_changed = p.device != q.device;
    value(k, p, q, c);
    if (c.value_changed == 1) ++d.values_changed;
    if (c.shape_changed || c.dtype_changed || c.device_changed || c.value_changed == 1) {
      d.changes.push_back(std::move(c));
    }
  }
  return d;
}

}  // namespace

ModelDiff diff_snapshots(const ModelSnapshot& a, const ModelSnapshot& b) {
  ModelDiff d;
  d.identity = identity_diff(a, b);
  d.placement = placement_diff(a, b);
  d.weights = weight_diff(a, b, [](const std::string&, const ParameterInfo& p, const ParameterInfo& q, WeightChange& c) {
    if (p.content_hash && q.content_hash) {
      c.value_changed = (*p.content_hash != *q.content_hash || c.shape_changed || c.dtype_changed) ? 1 : 0;
    }
  });
  return d;
}

ModelDiff diff_safetensors(const std::filesystem::path& original, const std::filesystem::path& modified) {
  const SafetensorsFile fa = SafetensorsFile::open(original);
  const SafetensorsFile fb = SafetensorsFile::open(modified);
  ModelSnapshot a, b;
  a.id = original.string();
  b.id = modified.string();
  a.class_name = b.class_name = "SafetensorsFile";
  for (const auto& e : fa.entries()) a.parameters[e.name] = ParameterInfo{e.shape, e.dtype, "cpu", e.nbytes(), {}};
  for (const auto& e : fb.entries()) b.parameters[e.name] = ParameterInfo{e.shape, e.dtype, "cpu", e.nbytes(), {}};
  ModelDiff d;
  d.identity = identity_diff(a, b);
  d.identity.model_cloned = false;  // two files are not one object cloned
  d.placement = placement_diff(a, b);
  constexpr std::size_t kChunk = 1 << 14;
  std::vector<float> xa(kChunk), xb(kChunk);
  d.weights = weight_diff(a, b, [&](const std::string& key, const ParameterInfo&, const ParameterInfo&, WeightChange& c) {
    const SafetensorsEntry& ea = *fa.find(key);
    const SafetensorsEntry& eb = *fb.find(key);
    const auto ba = fa.bytes(ea), bb = fb.bytes(eb);
    if (c.shape_changed) {
      c.value_changed = 1;
      return;
    }
    if (!c.dtype_changed) {
      c.value_changed = ba.size() == bb.size() && std::memcmp(ba.data(), bb.data(), ba.size()) == 0 ? 0 : 1;
      if (c.value_changed == 0) {
        c.delta_norm = 0.0;
        c.relative_delta = 0.0;
        return;
      }
    }
    if (!detail::convertible(ea.dtype) || !detail::convertible(eb.dtype)) {
      if (c.dtype_changed) c.value_changed = -1;
      return;
    }
    const std::size_t n = ea.nbytes() / dtype_size(ea.dtype);
    double diff2 = 0, norm2 = 0;
    for (std::size_t first = 0; first < n; first += kChunk) {
      const std::size_t count = std::min(kChunk, n - first);
      detail::convert_to_f32(ba.data(), ea.dtype, first, count, xa.data());
      detail::convert_to_f32(bb.data(), eb.dtype, first, count, xb.data());
      for (std::size_t i = 0; i < count; ++i) {
        const double dd = static_cast<double>(xb[i]) - xa[i];
        diff2 += dd * dd;
        norm2 += static_cast<double>(xa[i]) * xa[i];
      }
    }
    c.delta_norm = std::sqrt(diff2);
    c.relative_delta = norm2 > 0 ? c.delta_norm / std::sqrt(norm2) : (diff2 > 0 ? INFINITY : 0.0);
    if (c.dtype_changed) c.value_changed = diff2 > 0 ? 1 : 0;
  });
  return d;
}

void to_json(nlohmann::json& j, const IdentityDiff& d) {
  j = nlohmann::json{{"model_cloned", d.model_cloned},
                     {"class_changed", d.class_changed},
                     {"patches_added", d.patches_added},
                     {"uuid_changed", d.uuid_changed},
                     {"original_patch_count", d.original_patch_count},
                     {"modified_patch_count", d.modified_patch_count}};
}

void to_json(nlohmann::json& j, const WeightDiff& d) {
  nlohmann::json changes = nlohmann::json::object();
  const auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  for (const WeightChange& c : d.changes) {
    changes[c.key] = nlohmann::json{{"shape_changed", c.shape_changed},
                                    {"dtype_changed", c.dtype_changed},
                                    {"device_changed", c.device_changed},
                                    {"original_shape", c.original_shape},
                                    {"modified_shape", c.modified_shape},
                                    {"original_dtype", dtype_name(c.original_dtype)},
                                    {"modified_dtype", dtype_name(c.modified_dtype)},
                                    {"value_changed", c.value_changed < 0 ? nlohmann::json(nullptr) : nlohmann::json(c.value_changed == 1)},
                                    {"delta_norm", num(c.delta_norm)},
                                    {"relative_delta", num(c.relative_delta)}};
  }
  j = nlohmann::json{{"keys_added", d.keys_added},
                     {"keys_removed", d.keys_removed},
                     {"keys_common", d.keys_common},
                     {"total_keys_original", d.total_keys_original},
                     {"total_keys_modified", d.total_keys_modified},
                     {"values_changed", d.values_changed},
                     {"changes", std::move(changes)}};
}

void to_json(nlohmann::json& j, const PlacementDiff& d) {
  j = nlohmann::json{{"model_device_changed", d.model_device_changed},
                     {"load_device_changed", d.load_device_changed},
                     {"offload_device_changed", d.offload_device_changed},
                     {"original_device", d.original_device},
                     {"modified_device", d.modified_device},
                     {"original_load_device", d.original_load_device},
                     {"modified_load_device", d.modified_load_device},
                     {"original_offload_device", d.original_offload_device},
                     {"modified_offload_device", d.modified_offload_device}};
}

void to_json(nlohmann::json& j, const ModelDiff& d) {
  j = nlohmann::json{{"identity", d.identity}, {"weights", d.weights}, {"placement", d.placement}};
}

}  // namespace genscope
