// The patch every LoRA module type makes to its weight, computed as ComfyUI's
// calculate_weight does (float32 throughout), with the shape checks that make a merge refuse
// what ComfyUI would fail on instead of writing something else:
//   comfy/weight_adapter/lora.py  @ 6fd406fb14ca663225b88c6f75d7a7f2b997e5a0 (LoRA, LoCon mid)
//   comfy/weight_adapter/loha.py  @ 17adbb5cacc2d08310dad408e043a5d18e3ec013 (LoHa, Tucker)
//   comfy/weight_adapter/lokr.py  @ 179c2d35c84beb3d9761fcd146ffcba77273413e (LoKr, Tucker)
//   comfy/weight_adapter/base.py  @ 9c0cf36cd7964978850fd40f8cf76ac2cf9f9e15 (weight_decompose)
//   comfy/lora.py                 @ 41444b5236c613ee5ff7d09aa620f94b702f30eb (load order,
//                                   diff / set / w_norm / b_norm / diff_b)
#include "lora/lora_delta.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>

#include "genscope/error.hpp"
#include "lora/matmul.hpp"
#include "model/float_convert.hpp"

namespace genscope {
namespace {

using Shape = std::vector<std::int64_t>;

std::int64_t numel(std::span<const std::int64_t> shape) {
  return std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
}
std::int64_t cols(const Shape& shape) {  // columns when flattened to 2-D (ComfyUI flatten(1))
  return shape.empty() ? 1 : numel(shape) / std::max<std::int64_t>(shape[0], 1);
}
std::string shape_text(std::span<const std::int64_t> shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}
bool has(const LoraModule& m, const char* role) { return m.tensors.count(role) > 0; }

// A module's tensors by role, with their shapes, as float32 on demand. Each role's entry is
// looked up in the file once (inspecting a 2,000-module LoRA runs this for every module).
class Factors {
 public:
  Factors(const SafetensorsFile& file, const LoraModule& m) : file_(file) {
    entries_.reserve(m.tensors.size());
    for (const auto& [role, key] : m.tensors) entries_.emplace_back(role, file.find(key));
  }
  bool has(const char* role) const { return lookup(role) != nullptr; }
  const SafetensorsEntry& entry(const char* role) const { return *lookup(role); }
  const Shape& shape(const char* role) const { return entry(role).shape; }
  std::vector<float> get(const char* role) const { return detail::tensor_to_f32(file_, entry(role)); }

 private:
  const SafetensorsEntry* lookup(std::string_view role) const {
    for (const auto& [r, e] : entries_) {
      if (r == role) return e;
    }
    return nullptr;
  }
  const SafetensorsFile& file_;
  std::vector<std::pair<std::string_view, const SafetensorsEntry*>> entries_;
};

[[noreturn]] void fail(const char* name, const LoraModule& m, const std::string& what) {
  throw Error(name, "LoRA module '" + m.name + "': " + what);
}

// ComfyUI's Tucker rebuild, einsum("i j k l, j r, i p -> p r k l", t, wb, wa): wa is i×p,
// wb is j×r, t is i×j×k×l; the result is p×r×k×l, row-major.
std::vector<float> tucker_rebuild(const std::vector<float>& t, const Shape& ts, const std::vector<float>& wa,
                                  const Shape& as, const std::vector<float>& wb, const Shape& bs) {
  const std::int64_t ri = ts[0], rj = ts[1], kk = ts[2] * ts[3], p = as[1], r = bs[1];
  // tmp[i] (r × kk) = wbᵀ (r × rj) · t[i] (rj × kk)
  std::vector<float> tmp(static_cast<std::size_t>(ri * r * kk), 0.0f);
  for (std::int64_t i = 0; i < ri; ++i) {
    detail::matmul_add_at(wb.data(), t.data() + i * rj * kk, tmp.data() + i * r * kk, r, rj, kk, 1.0f);
  }
  // out (p × r·kk) = waᵀ (p × ri) · tmp (ri × r·kk)
  std::vector<float> out(static_cast<std::size_t>(p * r * kk), 0.0f);
  detail::matmul_add_at(wa.data(), tmp.data(), out.data(), p, ri, r * kk, 1.0f);
  return out;
}

// torch.kron for tensors of any rank (the smaller one gets leading 1s): out += s·kron(a, b).
void kron_add(const std::vector<float>& a, Shape as, const std::vector<float>& b, Shape bs, float s,
              std::span<float> out) {
  const std::size_t d = std::max(as.size(), bs.size());
  as.insert(as.begin(), d - as.size(), 1);
  bs.insert(bs.begin(), d - bs.size(), 1);
  Shape os(d);
  for (std::size_t i = 0; i < d; ++i) os[i] = as[i] * bs[i];
  // Row-major strides of the output; element (ia·bs + ib) per dimension.
  Shape ostride(d, 1);
  for (std::size_t i = d; i-- > 1;) ostride[i - 1] = ostride[i] * os[i];
  Shape ia(d, 0), ib(d, 0);
  const std::int64_t na = numel(as), nb = numel(bs);
  for (std::int64_t x = 0; x < na; ++x) {
    std::int64_t rest = x;
    for (std::size_t i = d; i-- > 0;) {
      ia[i] = rest % as[i];
      rest /= as[i];
    }
    const float va = s * a[static_cast<std::size_t>(x)];
    for (std::int64_t y = 0; y < nb; ++y) {
      rest = y;
      std::int64_t off = 0;
      for (std::size_t i = d; i-- > 0;) {
        ib[i] = rest % bs[i];
        rest /= bs[i];
        off += (ia[i] * bs[i] + ib[i]) * ostride[i];
      }
      out[static_cast<std::size_t>(off)] += va * b[static_cast<std::size_t>(y)];
    }
  }
}

// LoKr's w1 / w2 (whole, a·b, or Tucker for w2) as ComfyUI forms them, with their shapes.
struct Kron {
  std::vector<float> w1, w2;
  Shape s1, s2;
};
Kron lokr_factors(const Factors& f) {
  Kron k;
  if (f.has("lokr_w1")) {
    k.w1 = f.get("lokr_w1");
    k.s1 = f.shape("lokr_w1");
  } else {
    k.s1 = {f.shape("lokr_w1_a")[0], f.shape("lokr_w1_b")[1]};
    k.w1.assign(static_cast<std::size_t>(numel(k.s1)), 0.0f);
    detail::matmul_add(f.get("lokr_w1_a").data(), f.get("lokr_w1_b").data(), k.w1.data(), k.s1[0],
                       f.shape("lokr_w1_b")[0], k.s1[1], 1.0f);
  }
  if (f.has("lokr_w2")) {
    k.w2 = f.get("lokr_w2");
    k.s2 = f.shape("lokr_w2");
  } else if (f.has("lokr_t2")) {
    const Shape& ts = f.shape("lokr_t2");
    k.s2 = {f.shape("lokr_w2_a")[1], f.shape("lokr_w2_b")[1], ts[2], ts[3]};
    k.w2 = tucker_rebuild(f.get("lokr_t2"), ts, f.get("lokr_w2_a"), f.shape("lokr_w2_a"), f.get("lokr_w2_b"),
                          f.shape("lokr_w2_b"));
  } else {
    k.s2 = {f.shape("lokr_w2_a")[0], f.shape("lokr_w2_b")[1]};
    k.w2.assign(static_cast<std::size_t>(numel(k.s2)), 0.0f);
    detail::matmul_add(f.get("lokr_w2_a").data(), f.get("lokr_w2_b").data(), k.w2.data(), k.s2[0],
                       f.shape("lokr_w2_b")[0], k.s2[1], 1.0f);
  }
  if (k.s2.size() == 4) k.s1.insert(k.s1.end(), {1, 1});  // w1.unsqueeze(2).unsqueeze(2)
  return k;
}

// LoHa's m1 = (w1a·w1b) or its Tucker rebuild; `n` is 1 or 2.
std::vector<float> loha_factor(const Factors& f, int n) {
  const std::string w = "hada_w" + std::to_string(n), t = "hada_t" + std::to_string(n);
  const std::string a = w + "_a", b = w + "_b";
  if (f.has(t.c_str())) {
    return tucker_rebuild(f.get(t.c_str()), f.shape(t.c_str()), f.get(a.c_str()), f.shape(a.c_str()),
                          f.get(b.c_str()), f.shape(b.c_str()));
  }
  const Shape &as = f.shape(a.c_str()), &bs = f.shape(b.c_str());
  std::vector<float> out(static_cast<std::size_t>(as[0] * bs[1]), 0.0f);
  detail::matmul_add(f.get(a.c_str()).data(), f.get(b.c_str()).data(), out.data(), as[0], as[1], bs[1], 1.0f);
  return out;
}

// The scale ComfyUI gives the module (alpha / rank where it applies one, else 1).
float module_scale(const LoraModule& m) { return static_cast<float>(m.scale); }

bool comfy_dora(const LoraModule& m) { return detail::has_comfy_dora(m); }

// weight_decompose's norm: the axis (0: per output row of W, 1: per input column of W + ΔW)
// and the broadcast check of dora_scale against that norm's shape [1.., n, 1..].
int dora_axis(const Shape& dora, std::span<const std::int64_t> w) {
  return !dora.empty() && !w.empty() && dora[0] == w[0] ? 0 : 1;
}
bool dora_broadcasts(const Shape& dora, std::span<const std::int64_t> w, int axis) {
  if (w.size() < 2 || dora.empty() || dora.size() > w.size()) return false;
  for (std::size_t i = 0; i < dora.size(); ++i) {
    const std::size_t wi = w.size() - dora.size() + i;  // right-aligned, as torch broadcasts
    const std::int64_t norm_dim = static_cast<int>(wi) == axis ? w[wi] : 1;
    if (dora[i] != 1 && dora[i] != norm_dim) return false;
  }
  return true;
}

// ComfyUI weight_decompose on a float32 weight of shape `w` (the weight as patched so far),
// with calc = W + scale·ΔW already formed:
//   dora_scale.shape[0] == W.shape[0]: norm_p = ||W[p, ...]||, per output row, of the weight
//                                      *before* ΔW, exactly as base.py computes it;
//   otherwise:                         norm_q = ||calc[:, q, ...]||, per input column;
//   calc *= dora_scale / (norm + eps_f32);  W = calc (strength 1) or W += strength·(calc − W).
void weight_decompose(std::span<float> weight, std::vector<float>& calc, std::span<const std::int64_t> w,
                      const std::vector<float>& dora, const Shape& dora_shape, double strength) {
  const bool out_axis = dora_axis(dora_shape, w) == 0;
  const std::int64_t rows = w[0], in = w[1], inner = numel(w) / std::max<std::int64_t>(rows * in, 1);
  std::vector<double> sq(static_cast<std::size_t>(out_axis ? rows : in), 0.0);
  for (std::int64_t p = 0; p < rows; ++p) {
    for (std::int64_t q = 0; q < in; ++q) {
      for (std::int64_t k = 0; k < inner; ++k) {
        const std::size_t e = static_cast<std::size_t>((p * in + q) * inner + k);
        const double v = out_axis ? weight[e] : calc[e];
        sq[static_cast<std::size_t>(out_axis ? p : q)] += v * v;
      }
    }
  }
  const float eps = std::numeric_limits<float>::epsilon();  // torch.finfo(float32).eps
  std::vector<float> factor(sq.size());
  for (std::size_t i = 0; i < sq.size(); ++i) {
    const float norm = static_cast<float>(std::sqrt(sq[i])) + eps;
    factor[i] = (dora.size() == 1 ? dora[0] : dora[i]) / norm;
  }
  const float st = static_cast<float>(strength);
  for (std::int64_t p = 0; p < rows; ++p) {
    for (std::int64_t q = 0; q < in; ++q) {
      const float f = factor[static_cast<std::size_t>(out_axis ? p : q)];
      for (std::int64_t k = 0; k < inner; ++k) {
        const std::size_t e = static_cast<std::size_t>((p * in + q) * inner + k);
        const float c = calc[e] * f;
        weight[e] = strength != 1.0 ? weight[e] + st * (c - weight[e]) : c;
      }
    }
  }
}

void check_finite(const SafetensorsFile& file, const LoraModule& m) {
  for (const auto& [role, key] : m.tensors) {
    if (role == "alpha") continue;
    const SafetensorsEntry& e = *file.find(key);
    if (!dtype_is_float(e.dtype) || !detail::convertible(e.dtype)) continue;
    const auto v = detail::tensor_to_f32(file, e);
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!std::isfinite(v[i])) {
        fail("LoraNaN", m, "tensor '" + key + "' holds " + (std::isnan(v[i]) ? "NaN" : "Inf") + " at element " +
                               std::to_string(i));
      }
    }
  }
}

// Structure of each type: halves present, factor shapes that fit together (ComfyUI's torch.mm
// and einsum need exactly these).
void check_structure(const Factors& f, const LoraModule& m) {
  const auto need = [&](const char* role, const char* what) {
    if (!f.has(role)) fail("LoraMissingHalf", m, std::string("has no ") + what);
  };
  const auto dims = [&](const char* role, std::size_t n) {
    if (f.shape(role).size() != n) {
      fail("LoraRankMismatch", m, std::string(role) + " has shape " + shape_text(f.shape(role)) + ", expected " +
                                      std::to_string(n) + " dimensions");
    }
  };
  const auto agree = [&](bool ok, const std::string& what) {
    if (!ok) fail("LoraRankMismatch", m, what);
  };
  switch (detail::weight_patch_kind(m)) {
    case detail::WeightPatchKind::kNone:
      if (detail::bias_patch_role(m) == nullptr) fail("LoraUnsupported", m, "patches neither a weight nor a bias");
      return;
    case detail::WeightPatchKind::kSet:
    case detail::WeightPatchKind::kDiff:
    case detail::WeightPatchKind::kWNorm: return;
    case detail::WeightPatchKind::kAdapter: break;
  }
  // ComfyUI divides alpha by a factor's rows and multiplies factors; an empty one has no rank.
  for (const auto& [role, key] : m.tensors) {
    if (role != "alpha" && role != "dora_scale" && numel(f.shape(role.c_str())) == 0) {
      fail("LoraRankMismatch", m, role + " " + shape_text(f.shape(role.c_str())) + " is empty");
    }
  }
  switch (m.type) {
    case LoraModuleType::kLora: {
      need("up", "up matrix");
      need("down", "down matrix");
      const Shape &up = f.shape("up"), &down = f.shape("down");
      agree(up.size() >= 2 && down.size() >= 2, "up/down are not matrices");
      if (f.has("mid")) {
        dims("mid", 4);
        const Shape& mid = f.shape("mid");
        agree(cols(down) == down[1] && cols(up) == up[1] && mid[0] == mid[1] && mid[1] == down[0] && up[1] == mid[0],
              "up " + shape_text(up) + ", mid " + shape_text(mid) + " and down " + shape_text(down) +
                  " do not chain (LoCon Tucker needs up out×r, mid r×r×k×k, down r×in)");
      } else {
        agree(cols(up) == down[0], "up has rank " + std::to_string(cols(up)) + ", down has rank " +
                                       std::to_string(down[0]));
      }
      return;
    }
    case LoraModuleType::kLoha: {
      for (const char* r : {"hada_w1_a", "hada_w1_b", "hada_w2_a", "hada_w2_b"}) {
        need(r, r);
        dims(r, 2);
      }
      if (f.has("hada_t1") != f.has("hada_t2")) {
        fail("LoraMissingHalf", m, std::string("has ") + (f.has("hada_t1") ? "hada_t1 but no hada_t2" : "hada_t2 but no hada_t1"));
      }
      Shape m1, m2;
      for (int n : {1, 2}) {
        const std::string w = "hada_w" + std::to_string(n), t = "hada_t" + std::to_string(n);
        const Shape &a = f.shape((w + "_a").c_str()), &b = f.shape((w + "_b").c_str());
        Shape& out = n == 1 ? m1 : m2;
        if (f.has(t.c_str())) {
          dims(t.c_str(), 4);
          const Shape& ts = f.shape(t.c_str());
          agree(ts[0] == a[0] && ts[1] == b[0], t + " " + shape_text(ts) + " does not chain with " + w + "_a " +
                                                    shape_text(a) + " and " + w + "_b " + shape_text(b) +
                                                    " (Tucker: t r×r×k×k, a r×out, b r×in)");
          out = {a[1], b[1], ts[2], ts[3]};
        } else {
          agree(a[1] == b[0], w + "_a " + shape_text(a) + " and " + w + "_b " + shape_text(b) + " do not multiply");
          out = {a[0], b[1]};
        }
      }
      agree(m1 == m2, "(w1a·w1b) " + shape_text(m1) + " and (w2a·w2b) " + shape_text(m2) + " differ in shape");
      return;
    }
    case LoraModuleType::kLokr: {
      if (!f.has("lokr_w1") && !(f.has("lokr_w1_a") && f.has("lokr_w1_b"))) fail("LoraMissingHalf", m, "has no lokr_w1");
      if (!f.has("lokr_w2") && !(f.has("lokr_w2_a") && f.has("lokr_w2_b"))) fail("LoraMissingHalf", m, "has no lokr_w2");
      if (f.has("lokr_w1")) {
        dims("lokr_w1", 2);
      } else {
        dims("lokr_w1_a", 2);
        dims("lokr_w1_b", 2);
        agree(f.shape("lokr_w1_a")[1] == f.shape("lokr_w1_b")[0], "lokr_w1_a and lokr_w1_b do not multiply");
      }
      if (!f.has("lokr_w2")) {
        dims("lokr_w2_a", 2);
        dims("lokr_w2_b", 2);
        const Shape &a = f.shape("lokr_w2_a"), &b = f.shape("lokr_w2_b");
        if (f.has("lokr_t2")) {
          dims("lokr_t2", 4);
          const Shape& ts = f.shape("lokr_t2");
          agree(ts[0] == a[0] && ts[1] == b[0], "lokr_t2 " + shape_text(ts) + " does not chain with lokr_w2_a " +
                                                    shape_text(a) + " and lokr_w2_b " + shape_text(b) +
                                                    " (Tucker: t r×r×k×k, a r×out, b r×in)");
        } else {
          agree(a[1] == b[0], "lokr_w2_a and lokr_w2_b do not multiply");
        }
      }
      return;
    }
    default: return;
  }
}

}  // namespace

namespace detail {

WeightPatchKind weight_patch_kind(const LoraModule& m) noexcept {
  if (has(m, "set_weight")) return WeightPatchKind::kSet;
  if (has(m, "diff")) return WeightPatchKind::kDiff;
  if (has(m, "w_norm")) return WeightPatchKind::kWNorm;
  switch (m.type) {
    case LoraModuleType::kLora:
    case LoraModuleType::kLoha:
    case LoraModuleType::kLokr: return WeightPatchKind::kAdapter;
    default: return WeightPatchKind::kNone;
  }
}

// PEFT's lora_magnitude_vector is not read by ComfyUI's load_lora, so such a module merges as
// the plain LoRA ComfyUI applies.
bool has_comfy_dora(const LoraModule& m) noexcept {
  const auto it = m.tensors.find("dora_scale");
  return it != m.tensors.end() && it->second.ends_with(".dora_scale");
}

const char* bias_patch_role(const LoraModule& m) noexcept {
  if (has(m, "diff_b")) return "diff_b";
  if (has(m, "b_norm") && has(m, "w_norm")) return "b_norm";  // ComfyUI reads b_norm only with w_norm
  return nullptr;
}

std::vector<std::int64_t> module_delta_shape(const SafetensorsFile& file, const LoraModule& m) {
  const Factors f(file, m);
  try {
    switch (weight_patch_kind(m)) {
      case WeightPatchKind::kNone: return {};
      case WeightPatchKind::kSet: return f.shape("set_weight");
      case WeightPatchKind::kDiff: return f.shape("diff");
      case WeightPatchKind::kWNorm: return f.shape("w_norm");
      case WeightPatchKind::kAdapter: break;
    }
    check_structure(f, m);
  } catch (const Error&) {
    return {};
  }
  switch (m.type) {
    case LoraModuleType::kLora: {
      const Shape &up = f.shape("up"), &down = f.shape("down");
      if (f.has("mid")) return {up[0], down[1], f.shape("mid")[2], f.shape("mid")[3]};
      Shape s{up[0]};
      s.insert(s.end(), down.begin() + 1, down.end());
      return s;
    }
    case LoraModuleType::kLoha: {
      const Shape &a = f.shape("hada_w1_a"), &b = f.shape("hada_w1_b");
      if (f.has("hada_t1")) return {a[1], b[1], f.shape("hada_t1")[2], f.shape("hada_t1")[3]};
      return {a[0], b[1]};
    }
    case LoraModuleType::kLokr: {
      Shape s1 = f.has("lokr_w1") ? f.shape("lokr_w1") : Shape{f.shape("lokr_w1_a")[0], f.shape("lokr_w1_b")[1]};
      Shape s2;
      if (f.has("lokr_w2")) {
        s2 = f.shape("lokr_w2");
      } else if (f.has("lokr_t2")) {
        s2 = {f.shape("lokr_w2_a")[1], f.shape("lokr_w2_b")[1], f.shape("lokr_t2")[2], f.shape("lokr_t2")[3]};
      } else {
        s2 = {f.shape("lokr_w2_a")[0], f.shape("lokr_w2_b")[1]};
      }
      if (s2.size() == 4) s1.insert(s1.end(), {1, 1});
      const std::size_t d = std::max(s1.size(), s2.size());
      s1.insert(s1.begin(), d - s1.size(), 1);
      s2.insert(s2.begin(), d - s2.size(), 1);
      Shape s(d);
      for (std::size_t i = 0; i < d; ++i) {
        if (__builtin_mul_overflow(s1[i], s2[i], &s[i])) return {};  // no weight is that large
      }
      return s;
    }
    default: return {};
  }
}

}  // namespace detail

void LoraFile::validate(const LoraModule& m) const {
  check_structure(Factors(file_, m), m);
  check_finite(file_, m);
}

std::vector<float> LoraFile::delta(const LoraModule& m) const {
  std::vector<float> out(static_cast<std::size_t>(numel(m.delta_shape)), 0.0f);
  add_delta(m, 1.0, out);
  return out;
}

void LoraFile::add_delta(const LoraModule& m, double coefficient, std::span<float> out) const {
  validate(m);
  const Factors f(file_, m);
  if (m.delta_shape.empty() || out.size() != static_cast<std::size_t>(numel(m.delta_shape))) {
    fail("LoraShapeMismatch", m, "delta has " + std::to_string(numel(m.delta_shape)) + " elements, weight has " +
                                     std::to_string(out.size()));
  }
  const auto add_all = [&](const char* role, float s) {
    const auto t = f.get(role);
    for (std::size_t i = 0; i < out.size(); ++i) out[i] += s * t[i];
  };
  switch (detail::weight_patch_kind(m)) {
    case detail::WeightPatchKind::kNone:
    case detail::WeightPatchKind::kSet:
      fail("LoraUnsupported", m, std::string("of type ") + std::string(lora_module_type_name(m.type)) +
                                     " has no weight delta");
    case detail::WeightPatchKind::kDiff: return add_all("diff", static_cast<float>(coefficient));
    case detail::WeightPatchKind::kWNorm: return add_all("w_norm", static_cast<float>(coefficient));
    case detail::WeightPatchKind::kAdapter: break;
  }
  const float s = static_cast<float>(coefficient) * module_scale(m);
  switch (m.type) {
    case LoraModuleType::kLora: {
      const auto up = f.get("up"), down = f.get("down");
      const std::int64_t rows = f.shape("up")[0], r = f.shape("down")[0], n = cols(f.shape("down"));
      if (!f.has("mid")) {
        detail::matmul_add(up.data(), down.data(), out.data(), rows, r, n, s);
        return;
      }
      // LoCon Tucker (ComfyUI: down' = (downᵀ · midᵀ)ᵀ, dW = up · down'):
      // md[a] (in × kk) = downᵀ (in × r) · mid[a] (r × kk), then dW = up (out × r) · md.
      const auto mid = f.get("mid");
      const std::int64_t kk = f.shape("mid")[2] * f.shape("mid")[3];
      std::vector<float> md(static_cast<std::size_t>(r * n * kk), 0.0f);
      for (std::int64_t a = 0; a < r; ++a) {
        detail::matmul_add_at(down.data(), mid.data() + a * r * kk, md.data() + a * n * kk, n, r, kk, 1.0f);
      }
      detail::matmul_add(up.data(), md.data(), out.data(), rows, r, n * kk, s);
      return;
    }
    case LoraModuleType::kLoha: {
      const auto m1 = loha_factor(f, 1), m2 = loha_factor(f, 2);
      for (std::size_t i = 0; i < out.size(); ++i) out[i] += s * (m1[i] * m2[i]);
      return;
    }
    case LoraModuleType::kLokr: {
      const Kron k = lokr_factors(f);
      kron_add(k.w1, k.s1, k.w2, k.s2, s, out);
      return;
    }
    default: return;
  }
}

void LoraFile::validate_patch(const LoraModule& m, bool bias, std::span<const std::int64_t> shape) const {
  const Factors f(file_, m);
  const Shape target(shape.begin(), shape.end());
  if (bias) {
    const char* role = detail::bias_patch_role(m);
    if (role == nullptr) fail("LoraUnsupported", m, "has no bias patch (diff_b, or b_norm with w_norm)");
    if (f.shape(role) != target) {
      fail("LoraShapeMismatch", m, std::string(role) + " " + shape_text(f.shape(role)) + " does not fit bias " +
                                       shape_text(shape));
    }
    return;
  }
  validate(m);
  const detail::WeightPatchKind kind = detail::weight_patch_kind(m);
  if (kind == detail::WeightPatchKind::kNone) fail("LoraUnsupported", m, "has no weight patch (bias only)");
  if (kind != detail::WeightPatchKind::kAdapter) {
    // ComfyUI adds a diff only when its shape equals the weight's ("WEIGHT NOT MERGED"
    // otherwise) and copies set_weight with copy_, which needs the same shape.
    if (m.delta_shape != target) {
      fail("LoraShapeMismatch", m, "patch " + shape_text(m.delta_shape) + " does not fit weight " + shape_text(shape));
    }
    return;
  }
  // Adapters: lora_diff.reshape(weight.shape) needs the same number of elements.
  if (m.delta_shape.empty() || numel(m.delta_shape) != numel(shape)) {
    fail("LoraShapeMismatch", m, "delta " + shape_text(m.delta_shape) + " does not fit weight " + shape_text(shape));
  }
  if (comfy_dora(m)) {
    const Shape& d = f.shape("dora_scale");
    if (!dora_broadcasts(d, shape, dora_axis(d, shape))) {
      fail("LoraShapeMismatch", m, "dora_scale " + shape_text(d) + " does not broadcast against the " +
                                       (dora_axis(d, shape) == 0 ? "row" : "column") + " norms of weight " +
                                       shape_text(shape));
    }
  }
}

void LoraFile::patch_weight(const LoraModule& m, double strength, std::span<float> weight,
                            std::span<const std::int64_t> shape) const {
  validate_patch(m, false, shape);
  if (weight.size() != static_cast<std::size_t>(numel(shape))) {
    fail("LoraShapeMismatch", m, "weight span holds " + std::to_string(weight.size()) + " elements, shape " +
                                     shape_text(shape) + " has " + std::to_string(numel(shape)));
  }
  switch (detail::weight_patch_kind(m)) {
    case detail::WeightPatchKind::kSet: {
      const auto t = Factors(file_, m).get("set_weight");  // ComfyUI: weight.copy_(set), strength unused
      std::copy(t.begin(), t.end(), weight.begin());
      return;
    }
    case detail::WeightPatchKind::kAdapter:
      if (comfy_dora(m)) {
        std::vector<float> calc(weight.begin(), weight.end());
        add_delta(m, 1.0, calc);  // calc = W + scale·ΔW
        weight_decompose(weight, calc, shape, Factors(file_, m).get("dora_scale"), Factors(file_, m).shape("dora_scale"),
                         strength);
        return;
      }
      [[fallthrough]];
    default: add_delta(m, strength, weight);
  }
}

void LoraFile::patch_bias(const LoraModule& m, double strength, std::span<float> bias) const {
  const Shape shape{static_cast<std::int64_t>(bias.size())};
  validate_patch(m, true, shape);
  check_finite(file_, m);
  const auto t = Factors(file_, m).get(detail::bias_patch_role(m));
  const float s = static_cast<float>(strength);
  for (std::size_t i = 0; i < bias.size(); ++i) bias[i] += s * t[i];
}

}  // namespace genscope
