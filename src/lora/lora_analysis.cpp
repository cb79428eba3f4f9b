// LoRA analysis: rank, alpha, scale, shapes, sizes and ||dW||_F per module, computed from
// the factors (never forming up·down for plain LoRAs). The deltas themselves: lora_delta.cpp.
#include <cmath>
#include <numeric>
#include <string>

#include "genscope/error.hpp"
#include "genscope/lora.hpp"
#include "lora/lora_delta.hpp"
#include "lora/matmul.hpp"
#include "model/float_convert.hpp"

namespace genscope {
namespace {

using detail::tensor_to_f32;

std::int64_t numel(const std::vector<std::int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
}
// Columns when a tensor is flattened to 2-D (dim 0 stays rows).
std::int64_t cols(const std::vector<std::int64_t>& shape) {
  return shape.empty() ? 1 : numel(shape) / std::max<std::int64_t>(shape[0], 1);
}

double frobenius(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

}  // namespace

double lora_delta_norm(const float* up, const float* down, std::int64_t m, std::int64_t r,
                       std::int64_t n) {
  // ||B A||_F^2 = trace((A Aᵀ)(Bᵀ B)) with B = up (m×r), A = down (r×n).
  std::vector<double> aat(static_cast<std::size_t>(r * r), 0.0), btb(static_cast<std::size_t>(r * r), 0.0);
  for (std::int64_t i = 0; i < r; ++i) {
    for (std::int64_t j = i; j < r; ++j) {
      double s = 0;
      const float* ai = down + i * n;
      const float* aj = down + j * n;
      for (std::int64_t c = 0; c < n; ++c) s += static_cast<double>(ai[c]) * aj[c];
      aat[i * r + j] = aat[j * r + i] = s;
    }
  }
  for (std::int64_t row = 0; row < m; ++row) {
    const float* b = up + row * r;
    for (std::int64_t i = 0; i < r; ++i) {
      const double bi = b[i];
      for (std::int64_t j = 0; j < r; ++j) btb[i * r + j] += bi * b[j];
    }
  }
  double trace = 0;
  for (std::size_t i = 0; i < aat.size(); ++i) trace += aat[i] * btb[i];  // both symmetric
  return std::sqrt(std::max(trace, 0.0));
}

LoraFile::LoraFile(std::filesystem::path path, SafetensorsFile file)
    : path_(std::move(path)), file_(std::move(file)) {}

const LoraModule* LoraFile::module(std::string_view name) const noexcept {
  const auto it = std::lower_bound(modules_.begin(), modules_.end(), name,
                                   [](const LoraModule& m, std::string_view n) { return m.name < n; });
  return it != modules_.end() && it->name == name ? &*it : nullptr;
}

std::shared_ptr<const LoraFile> LoraFile::open(const std::filesystem::path& path, bool norms) {
  auto file = SafetensorsFile::open(path);
  std::shared_ptr<LoraFile> lora(new LoraFile(path, std::move(file)));
  std::vector<std::string> keys;
  keys.reserve(lora->file_.entries().size());
  for (const auto& e : lora->file_.entries()) keys.push_back(e.name);
  lora->modules_ = group_lora_keys(keys, &lora->unknown_keys_);
  std::vector<std::string> names;
  names.reserve(lora->modules_.size());
  // Each module's tensors by role, looked up in the file once (grouping only records keys
  // present in the file, so the lookups cannot fail).
  std::vector<std::pair<std::string_view, const SafetensorsEntry*>> entries;
  for (LoraModule& m : lora->modules_) {
    names.push_back(m.name);
    entries.clear();
    for (const auto& [role, key] : m.tensors) {
      const SafetensorsEntry& e = *lora->file_.find(key);
      entries.emplace_back(role, &e);
      m.bytes += e.nbytes();
      if (role != "alpha") m.parameter_count += numel(e.shape);
    }
    const auto entry = [&entries](std::string_view role) -> const SafetensorsEntry* {
      for (const auto& [r, e] : entries) {
        if (r == role) return e;
      }
      return nullptr;
    };
    const auto has = [&entry](const char* role) { return entry(role) != nullptr; };
    const auto shape = [&entry](const char* role) -> const std::vector<std::int64_t>& { return entry(role)->shape; };
    const auto f32 = [&](const char* role) { return tensor_to_f32(lora->file_, *entry(role)); };
    if (has("alpha")) {
      try {
        m.alpha = detail::scalar_value(lora->file_, *entry("alpha"));
      } catch (const Error&) {
      }
    }
    // Rank as ComfyUI divides alpha by it: rows of down (LoRA), of hada_w1_b (LoHa), of
    // lokr_w2_b, else lokr_w1_b (LoKr, only when a factor is decomposed).
    if (m.type == LoraModuleType::kLora && has("down") && !shape("down").empty()) m.rank = shape("down")[0];
    if (m.type == LoraModuleType::kLoha && has("hada_w1_b") && !shape("hada_w1_b").empty()) m.rank = shape("hada_w1_b")[0];
    if (m.type == LoraModuleType::kLokr) {
      if (has("lokr_w1_b") && !has("lokr_w1") && !shape("lokr_w1_b").empty()) m.rank = shape("lokr_w1_b")[0];
      if (has("lokr_w2_b") && !has("lokr_w2") && !shape("lokr_w2_b").empty()) m.rank = shape("lokr_w2_b")[0];
    }
    m.delta_shape = detail::module_delta_shape(lora->file_, m);
    // ComfyUI's weight adapters scale by alpha / rank whenever the file has an alpha (alpha 0
    // gives 0) and the type is decomposed; diff / set_weight / norm patches are never scaled.
    const bool scaled = m.type == LoraModuleType::kLora || m.type == LoraModuleType::kLoha ||
                        (m.type == LoraModuleType::kLokr && m.rank > 0);
    m.scale = scaled && m.alpha && m.rank > 0 ? *m.alpha / static_cast<double>(m.rank) : 1.0;
    if (!norms) continue;
    try {
      const bool adapter = detail::weight_patch_kind(m) == detail::WeightPatchKind::kAdapter;
      if (adapter && m.type == LoraModuleType::kLora && !has("mid")) {
        lora->validate(m);
        const auto up = f32("up");
        const auto down = f32("down");
        m.delta_norm = m.scale * lora_delta_norm(up.data(), down.data(), shape("up")[0], shape("down")[0],
                                                 cols(shape("down")));
      } else if (adapter && m.type == LoraModuleType::kLokr && !has("lokr_t2")) {
        // ||kron(A, B)||_F = ||A||_F ||B||_F, each factor formed at its own small size.
        lora->validate(m);
        const auto factor_norm = [&](const char* whole, const char* a, const char* b) {
          if (has(whole)) return frobenius(f32(whole));
          const auto fa = f32(a);
          const auto fb = f32(b);
          return lora_delta_norm(fa.data(), fb.data(), shape(a)[0], shape(b)[0], cols(shape(b)));
        };
        m.delta_norm = m.scale * factor_norm("lokr_w1", "lokr_w1_a", "lokr_w1_b") *
                       factor_norm("lokr_w2", "lokr_w2_a", "lokr_w2_b");
      } else if (detail::weight_patch_kind(m) != detail::WeightPatchKind::kNone &&
                 detail::weight_patch_kind(m) != detail::WeightPatchKind::kSet) {
        m.delta_norm = frobenius(lora->delta(m));  // LoCon mid, LoHa, LoKr Tucker, diff, w_norm
      }
    } catch (const Error&) {
      // Broken modules keep NaN here; validate()/merge report them by name.
    }
  }
  lora->arch_ = detect_lora_arch(names, &lora->arch_evidence_);
  return lora;
}

void to_json(nlohmann::json& j, const LoraModule& m) {
  j = nlohmann::json{{"name", m.name},
                     {"type", lora_module_type_name(m.type)},
                     {"naming", lora_naming_name(m.naming)},
                     {"target", lora_target_name(m.target)},
                     {"rank", m.rank},
                     {"alpha", m.alpha ? nlohmann::json(*m.alpha) : nlohmann::json(nullptr)},
                     {"scale", m.scale},
                     {"delta_shape", m.delta_shape},
                     {"parameters", m.parameter_count},
                     {"bytes", m.bytes},
                     {"dora", m.dora},
                     {"delta_norm", std::isfinite(m.delta_norm) ? nlohmann::json(m.delta_norm) : nlohmann::json(nullptr)}};
  nlohmann::json tensors = nlohmann::json::object();
  for (const auto& [role, key] : m.tensors) tensors[role] = key;
  j["tensors"] = std::move(tensors);
}

nlohmann::json lora_inspection_json(const LoraFile& lora) {
  nlohmann::json j;
  j["file"] = lora.path().string();
  j["file_bytes"] = lora.file().file_size();
  j["tensors"] = lora.file().entries().size();
  j["modules_count"] = lora.modules().size();
  j["architecture"] = model_arch_name(lora.arch());
  j["architecture_evidence"] = lora.arch_evidence();
  std::map<std::string, int> by_type, by_target, by_naming, by_rank;
  std::uint64_t params = 0;
  for (const LoraModule& m : lora.modules()) {
    ++by_type[std::string(lora_module_type_name(m.type))];
    ++by_target[std::string(lora_target_name(m.target))];
    ++by_naming[std::string(lora_naming_name(m.naming))];
    if (m.rank > 0) ++by_rank[std::to_string(m.rank)];
    params += static_cast<std::uint64_t>(m.parameter_count);
  }
  j["by_type"] = by_type;
  j["by_target"] = by_target;
  j["by_naming"] = by_naming;
  j["by_rank"] = by_rank;
  j["parameters"] = params;
  j["metadata"] = lora.file().metadata();
  j["modules"] = lora.modules();
  j["unknown_keys"] = lora.unknown_keys();
  return j;
}

}  // namespace genscope
