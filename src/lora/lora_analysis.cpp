// LoRA analysis: rank, alpha, scale, shapes, sizes and ||dW||_F per module, computed from
// the factors (never forming up·down for plain LoRAs), and dW itself for merges.
#include <cmath>
#include <numeric>
#include <string>

#include "genscope/error.hpp"
#include "genscope/lora.hpp"
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
    : path_(std::move(path)), file_(std::move(file)) {
  by_name_.reserve(file_.entries().size());
  for (const SafetensorsEntry& e : file_.entries()) by_name_.emplace(e.name, &e);
}

// Grouping only records keys present in the file, so the lookup cannot fail.
const SafetensorsEntry& LoraFile::entry(const std::string& key) const { return *by_name_.at(key); }

const LoraModule* LoraFile::module(std::string_view name) const noexcept {
  const auto it = std::lower_bound(modules_.begin(), modules_.end(), name,
                                   [](const LoraModule& m, std::string_view n) { return m.name < n; });
  return it != modules_.end() && it->name == name ? &*it : nullptr;
}

void LoraFile::validate(const LoraModule& m) const {
  const auto has = [&m](const char* role) { return m.tensors.count(role) > 0; };
  const auto shape = [&](const char* role) { return entry(m.tensors.at(role)).shape; };
  switch (m.type) {
    case LoraModuleType::kLora: {
      if (!has("up") || !has("down")) {
        throw Error("LoraMissingHalf", "LoRA module '" + m.name + "' has no " +
                                           (has("up") ? "down" : "up") + " matrix");
      }
      const auto up = shape("up"), down = shape("down");
      if (up.size() < 2 || down.size() < 2) {
        throw Error("LoraRankMismatch", "LoRA module '" + m.name + "': up/down are not matrices");
      }
      // up: out × r (× 1 × 1); with a Tucker mid (r × r × k × k) between up and down.
      const std::int64_t up_rank = has("mid") ? shape("mid")[0] : down[0];
      const std::int64_t down_rank = has("mid") ? shape("mid")[1] : up[1];
      if (up[1] != up_rank || down_rank != down[0] || cols(up) != up[1]) {
        throw Error("LoraRankMismatch", "LoRA module '" + m.name + "': up has rank " +
                                            std::to_string(up[1]) + ", down has rank " +
                                            std::to_string(down[0]));
      }
      break;
    }
    case LoraModuleType::kLoha:
      for (const char* r : {"hada_w1_a", "hada_w1_b", "hada_w2_a", "hada_w2_b"}) {
        if (!has(r)) throw Error("LoraMissingHalf", "LoHa module '" + m.name + "' has no " + r);
      }
      if (has("hada_t1") || has("hada_t2")) {
        throw Error("LoraUnsupported", "LoHa module '" + m.name + "' uses Tucker factors (hada_t1/t2)");
      }
      if (shape("hada_w1_a")[1] != shape("hada_w1_b")[0] || shape("hada_w2_a")[1] != shape("hada_w2_b")[0] ||
          shape("hada_w1_a")[0] != shape("hada_w2_a")[0] || cols(shape("hada_w1_b")) != cols(shape("hada_w2_b"))) {
        throw Error("LoraRankMismatch", "LoHa module '" + m.name + "' has inconsistent factor shapes");
      }
      break;
    case LoraModuleType::kLokr:
      if (!has("lokr_w1") && !(has("lokr_w1_a") && has("lokr_w1_b"))) {
        throw Error("LoraMissingHalf", "LoKr module '" + m.name + "' has no w1");
      }
      if (!has("lokr_w2") && !(has("lokr_w2_a") && has("lokr_w2_b"))) {
        throw Error("LoraMissingHalf", "LoKr module '" + m.name + "' has no w2");
      }
      if (has("lokr_t2")) throw Error("LoraUnsupported", "LoKr module '" + m.name + "' uses lokr_t2");
      break;
    case LoraModuleType::kDiff:
      if (!has("diff")) throw Error("LoraUnsupported", "module '" + m.name + "' has only a bias delta (diff_b)");
      break;
    default: break;
  }
  for (const auto& [role, key] : m.tensors) {
    if (role == "alpha") continue;
    const SafetensorsEntry* e = &entry(key);
    if (!dtype_is_float(e->dtype) || !detail::convertible(e->dtype)) continue;
    const auto v = tensor_to_f32(file_, *e);
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!std::isfinite(v[i])) {
        throw Error("LoraNaN", "LoRA module '" + m.name + "': tensor '" + key + "' holds " +
                                   (std::isnan(v[i]) ? "NaN" : "Inf") + " at element " + std::to_string(i));
      }
    }
  }
}

std::vector<float> LoraFile::delta(const LoraModule& m) const {
  std::vector<float> out(static_cast<std::size_t>(numel(m.delta_shape)), 0.0f);
  add_delta(m, 1.0, out);
  return out;
}

void LoraFile::add_delta(const LoraModule& m, double coefficient, std::span<float> out) const {
  validate(m);
  const auto get = [&](const char* role) { return tensor_to_f32(file_, entry(m.tensors.at(role))); };
  const auto shape = [&](const char* role) { return entry(m.tensors.at(role)).shape; };
  if (m.delta_shape.empty() || out.size() != static_cast<std::size_t>(numel(m.delta_shape))) {
    throw Error("LoraShapeMismatch", "module '" + m.name + "': delta has " +
                                         std::to_string(numel(m.delta_shape)) + " elements, weight has " +
                                         std::to_string(out.size()));
  }
  const float s = static_cast<float>(m.scale * coefficient);
  switch (m.type) {
    case LoraModuleType::kLora: {
      const auto up = get("up"), down = get("down");
      const std::int64_t rows = shape("up")[0], r = shape("down")[0], n = cols(shape("down"));
      if (m.tensors.count("mid") == 0) {
        detail::matmul_add(up.data(), down.data(), out.data(), rows, r, n, s);
      } else {
        // LoCon Tucker: dW[p, q, k] = sum_ij up[p,i] mid[i,j,k] down[j,q], mid is r×r×(k·k).
        const auto mid = get("mid");
        const std::int64_t ru = shape("mid")[0], kk = cols(shape("mid")) / r, in = n;
        std::vector<float> md(static_cast<std::size_t>(ru * in * kk), 0.0f);  // [i, q, k]
        for (std::int64_t i = 0; i < ru; ++i)
          for (std::int64_t j = 0; j < r; ++j)
            for (std::int64_t q = 0; q < in; ++q)
              for (std::int64_t k = 0; k < kk; ++k) md[(i * in + q) * kk + k] += mid[(i * r + j) * kk + k] * down[j * in + q];
        detail::matmul_add(up.data(), md.data(), out.data(), rows, ru, in * kk, s);
      }
      return;
    }
    case LoraModuleType::kLoha: {
      std::vector<float> w1(out.size(), 0.0f), w2(out.size(), 0.0f);
      const std::int64_t rows = shape("hada_w1_a")[0], n = cols(shape("hada_w1_b"));
      detail::matmul_add(get("hada_w1_a").data(), get("hada_w1_b").data(), w1.data(), rows, shape("hada_w1_b")[0], n, 1.0f);
      detail::matmul_add(get("hada_w2_a").data(), get("hada_w2_b").data(), w2.data(), rows, shape("hada_w2_b")[0], n, 1.0f);
      for (std::size_t i = 0; i < out.size(); ++i) out[i] += s * w1[i] * w2[i];
      return;
    }
    case LoraModuleType::kLokr: {
      const auto factor = [&](const char* whole, const char* a, const char* b, std::int64_t& r0,
                              std::int64_t& c0) {
        if (m.tensors.count(whole) != 0) {
          r0 = shape(whole)[0];
          c0 = cols(shape(whole));
          return get(whole);
        }
        r0 = shape(a)[0];
        c0 = cols(shape(b));
        std::vector<float> w(static_cast<std::size_t>(r0 * c0), 0.0f);
        detail::matmul_add(get(a).data(), get(b).data(), w.data(), r0, shape(b)[0], c0, 1.0f);
        return w;
      };
      std::int64_t a1, b1, a2, b2;
      const auto w1 = factor("lokr_w1", "lokr_w1_a", "lokr_w1_b", a1, b1);
      const auto w2 = factor("lokr_w2", "lokr_w2_a", "lokr_w2_b", a2, b2);
      // kron(w1, w2) with w2 possibly (c, d·k·k): the kernel stays innermost.
      const std::int64_t kk = m.delta_shape.size() > 2 ? numel(m.delta_shape) / (m.delta_shape[0] * m.delta_shape[1]) : 1;
      const std::int64_t d = b2 / kk, n = b1 * d;
      for (std::int64_t i = 0; i < a1; ++i)
        for (std::int64_t j = 0; j < b1; ++j)
          for (std::int64_t p = 0; p < a2; ++p)
            for (std::int64_t q = 0; q < d; ++q)
              for (std::int64_t k = 0; k < kk; ++k)
                out[((i * a2 + p) * n + j * d + q) * kk + k] += s * w1[i * b1 + j] * w2[(p * d + q) * kk + k];
      return;
    }
    case LoraModuleType::kDiff: {
      const auto diff = get("diff");
      for (std::size_t i = 0; i < out.size(); ++i) out[i] += s * diff[i];
      return;
    }
    default:
      throw Error("LoraUnsupported", "module '" + m.name + "' of type " +
                                         std::string(lora_module_type_name(m.type)) + " has no weight delta");
  }
}

std::shared_ptr<const LoraFile> LoraFile::open(const std::filesystem::path& path, bool norms) {
  auto file = SafetensorsFile::open(path);
  std::shared_ptr<LoraFile> lora(new LoraFile(path, std::move(file)));
  std::vector<std::string> keys;
  keys.reserve(lora->file_.entries().size());
  for (const auto& e : lora->file_.entries()) keys.push_back(e.name);
  lora->modules_ = group_lora_keys(keys, &lora->unknown_keys_);
  std::vector<std::string> names;
  for (LoraModule& m : lora->modules_) {
    names.push_back(m.name);
    const auto has = [&m](const char* role) { return m.tensors.count(role) > 0; };
    const auto shape = [&](const char* role) { return lora->entry(m.tensors.at(role)).shape; };
    for (const auto& [role, key] : m.tensors) {
      const SafetensorsEntry& e = lora->entry(m.tensors.at(role));
      m.bytes += e.nbytes();
      if (role != "alpha") m.parameter_count += numel(e.shape);
    }
    if (has("alpha")) {
      try {
        m.alpha = detail::scalar_value(lora->file_, lora->entry(m.tensors.at("alpha")));
      } catch (const Error&) {
      }
    }
    switch (m.type) {
      case LoraModuleType::kLora:
        if (has("down")) m.rank = shape("down")[0];
        if (has("up") && has("down")) {
          auto d = shape("down");
          m.delta_shape = {shape("up")[0]};
          if (has("mid")) d = {d[0], d[1], shape("mid").size() > 2 ? shape("mid")[2] : 1,
                               shape("mid").size() > 3 ? shape("mid")[3] : 1};
          m.delta_shape.insert(m.delta_shape.end(), d.begin() + 1, d.end());
        }
        break;
      case LoraModuleType::kLoha:
        if (has("hada_w1_b")) m.rank = shape("hada_w1_b")[0];
        if (has("hada_w1_a") && has("hada_w1_b")) m.delta_shape = {shape("hada_w1_a")[0], cols(shape("hada_w1_b"))};
        break;
      case LoraModuleType::kLokr: {
        if (has("lokr_w1_b")) m.rank = shape("lokr_w1_b")[0];
        if (has("lokr_w2_b")) m.rank = shape("lokr_w2_b")[0];
        std::vector<std::int64_t> s1 = has("lokr_w1") ? shape("lokr_w1") : std::vector<std::int64_t>{};
        std::vector<std::int64_t> s2 = has("lokr_w2") ? shape("lokr_w2") : std::vector<std::int64_t>{};
        if (s1.empty() && has("lokr_w1_a") && has("lokr_w1_b")) s1 = {shape("lokr_w1_a")[0], shape("lokr_w1_b")[1]};
        if (s2.empty() && has("lokr_w2_a") && has("lokr_w2_b")) {
          s2 = shape("lokr_w2_b");
          s2[0] = shape("lokr_w2_a")[0];
        }
        if (s1.size() == 2 && s2.size() >= 2) {
          m.delta_shape = {s1[0] * s2[0], s1[1] * s2[1]};
          m.delta_shape.insert(m.delta_shape.end(), s2.begin() + 2, s2.end());
        }
        break;
      }
      case LoraModuleType::kDiff:
        if (has("diff")) m.delta_shape = shape("diff");
        break;
      case LoraModuleType::kSetWeight:
        m.delta_shape = shape("set_weight");
        break;
      case LoraModuleType::kNorm:
        if (has("w_norm")) m.delta_shape = shape("w_norm");
        break;
    }
    // LyCORIS applies alpha/rank only to decomposed factors; kohya/PEFT always.
    const bool scaled = m.type == LoraModuleType::kLora || m.type == LoraModuleType::kLoha ||
                        (m.type == LoraModuleType::kLokr && m.rank > 0);
    m.scale = scaled && m.alpha && *m.alpha != 0.0 && m.rank > 0 ? *m.alpha / static_cast<double>(m.rank) : 1.0;
    if (!norms) continue;
    try {
      switch (m.type) {
        case LoraModuleType::kLora:
          if (!has("mid")) {
            lora->validate(m);
            const auto up = tensor_to_f32(lora->file_, lora->entry(m.tensors.at("up")));
            const auto down = tensor_to_f32(lora->file_, lora->entry(m.tensors.at("down")));
            m.delta_norm = m.scale * lora_delta_norm(up.data(), down.data(), shape("up")[0],
                                                     shape("down")[0], cols(shape("down")));
          } else {
            m.delta_norm = frobenius(lora->delta(m));
          }
          break;
        case LoraModuleType::kLokr: {
          // ||kron(A, B)||_F = ||A||_F ||B||_F, each factor formed at its own small size.
          lora->validate(m);
          double n1 = 0, n2 = 0;
          if (has("lokr_w1")) {
            n1 = frobenius(tensor_to_f32(lora->file_, lora->entry(m.tensors.at("lokr_w1"))));
          } else {
            const auto a = tensor_to_f32(lora->file_, lora->entry(m.tensors.at("lokr_w1_a")));
            const auto b = tensor_to_f32(lora->file_, lora->entry(m.tensors.at("lokr_w1_b")));
            n1 = lora_delta_norm(a.data(), b.data(), shape("lokr_w1_a")[0], shape("lokr_w1_b")[0], cols(shape("lokr_w1_b")));
          }
          if (has("lokr_w2")) {
            n2 = frobenius(tensor_to_f32(lora->file_, lora->entry(m.tensors.at("lokr_w2"))));
          } else {
            const auto a = tensor_to_f32(lora->file_, lora->entry(m.tensors.at("lokr_w2_a")));
            const auto b = tensor_to_f32(lora->file_, lora->entry(m.tensors.at("lokr_w2_b")));
            n2 = lora_delta_norm(a.data(), b.data(), shape("lokr_w2_a")[0], shape("lokr_w2_b")[0], cols(shape("lokr_w2_b")));
          }
          m.delta_norm = m.scale * n1 * n2;
          break;
        }
        case LoraModuleType::kLoha:
        case LoraModuleType::kDiff:
          m.delta_norm = frobenius(lora->delta(m));
          break;
        default: break;
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
