// How a LoRA fits a base under a loader's rules (loader_fit.hpp): the shared resolution of a
// patch onto the base file's tensors, the verdict, the comparison with the other loader and
// the JSON form.
#include <algorithm>
#include <future>
#include <numeric>
#include <set>
#include <string>
#include <unordered_map>

#include "genscope/lora.hpp"
#include "lora/loader_fit.hpp"

namespace genscope {
namespace {

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::int64_t numel(const std::vector<std::int64_t>& s) {
  return std::accumulate(s.begin(), s.end(), std::int64_t{1}, std::multiplies<>());
}

// SD1.x and SD2.x LoRAs cannot always be told apart by names; treat them as one family.
int family(ModelArch a) { return a == ModelArch::kSD2 ? static_cast<int>(ModelArch::kSD1) : static_cast<int>(a); }

// Does a delta of shape `d` fit the weight (or window) of shape `w`? Conv LoRAs may be
// stored flattened ((out, in·k·k) for LoHa) or with 1×1 trailing dims.
bool shape_fits(const std::vector<std::int64_t>& d, const std::vector<std::int64_t>& w) {
  if (d.empty() || w.empty() || d[0] != w[0]) return false;
  if (numel(d) != numel(w)) return false;
  if (d.size() == w.size()) return d == w;
  return true;  // same rows and element count: a flattened conv kernel
}

void unsupported(LoraFit& fit, const std::string& module, const std::string& why) {
  for (const LoraLoaderFailure& f : fit.merge_unsupported) {
    if (f.module == module) return;
  }
  fit.merge_unsupported.push_back({module, "LoraUnsupported", "LoRA module '" + module + "': " + why});
}

bool is_text_target(LoraTarget t) {
  return t == LoraTarget::kTextEncoder || t == LoraTarget::kTextEncoder2 || t == LoraTarget::kT5;
}

// The sentence of a fit, prefixed with the loader's name.
void set_verdict(LoraFit& fit, const LoraFile& lora, bool base_has_text_encoder) {
  const std::string who(lora_loader_name(fit.loader));
  const std::string base(model_arch_name(fit.base_arch));
  std::set<std::string> loaded_modules;
  for (const auto& [module, target] : fit.matched) loaded_modules.insert(module);
  const bool known = fit.lora_arch != ModelArch::kUnknown && fit.base_arch != ModelArch::kUnknown;
  if (known && family(fit.lora_arch) != family(fit.base_arch)) {
    fit.architecture_mismatch = true;
    fit.verdict = who + ": this LoRA was trained for " + std::string(model_arch_name(fit.lora_arch)) +
                  "; the base is " + base + " (evidence: " + lora.arch_evidence() + ")";
  } else if (!fit.loader_failures.empty()) {
    fit.verdict = who + " fails to load this LoRA: " + fit.loader_failures.front().message;
  } else if (fit.matched.empty() && fit.missing_from_file.empty()) {
    fit.architecture_mismatch = !lora.modules().empty();
    fit.verdict = who + ": no LoRA module maps onto this base (" + base + ")";
  } else if (!fit.shape_mismatches.empty()) {
    fit.verdict = who + ": " + std::to_string(fit.shape_mismatches.size()) +
                  " matched modules do not fit the base weights' shapes";
  } else if (!fit.lora_keys_not_loaded.empty() || !fit.not_loaded.empty() || !fit.missing_from_file.empty() ||
             !fit.shadowed.empty()) {
    fit.verdict = who + ": partial fit: " + std::to_string(loaded_modules.size()) + " of " +
                  std::to_string(lora.modules().size()) + " modules load onto this " + base + " base";
    std::vector<std::string> parts;
    if (!fit.lora_keys_not_loaded.empty()) parts.push_back(std::to_string(fit.lora_keys_not_loaded.size()) + " tensors not loaded");
    if (!fit.not_loaded.empty()) parts.push_back(std::to_string(fit.not_loaded.size()) + " NOT LOADED");
    if (!fit.missing_from_file.empty()) parts.push_back(std::to_string(fit.missing_from_file.size()) + " patch weights missing from this file");
    if (!fit.shadowed.empty()) parts.push_back(std::to_string(fit.shadowed.size()) + " shadowed");
    std::string joined;
    for (const std::string& p : parts) joined += (joined.empty() ? "" : ", ") + p;
    fit.verdict += " (" + joined + ")";
  } else {
    fit.verdict = who + ": all " + std::to_string(loaded_modules.size()) + " modules load onto this " + base + " base";
  }
  if (!base_has_text_encoder) {
    std::size_t text = 0;
    for (const LoraModule& m : lora.modules()) text += is_text_target(m.target);
    if (text > 0) {
      fit.verdict += "; the base file has no text encoder, so its " + std::to_string(text) +
                     " text-encoder modules load only when the loader has one beside it";
    }
  }
}

// Everything a profile leaves to the caller: counts, the architecture, the verdict.
void finish(LoraFit& fit, const LoraFile& lora, const SafetensorsFile& base, bool base_has_text_encoder) {
  fit.lora_arch = lora.arch();
  fit.lora_tensors = lora.file().entries().size();
  fit.base_keys = base.entries().size();
  std::set<std::string_view> patched;  // the distinct keys of fit.patched_tensors()
  for (const auto& [module, target] : fit.matched) {
    if (!target.materialize_identity) patched.insert(target.key);  // a built-in weight is no file tensor
    if (!target.bias_key.empty()) patched.insert(target.bias_key);
  }
  fit.base_weights_patched = patched.size();
  set_verdict(fit, lora, base_has_text_encoder);
}

// Sorted tensor names a fit loads (none when the loader fails).
std::vector<std::string_view> loaded(const LoraFit& fit, const detail::LoraNames& names) {
  std::vector<std::string_view> out;
  if (!fit.loader_failures.empty()) return out;
  std::vector<std::string_view> not_loaded(fit.lora_keys_not_loaded.begin(), fit.lora_keys_not_loaded.end());
  std::set_difference(names.sorted().begin(), names.sorted().end(), not_loaded.begin(), not_loaded.end(),
                      std::back_inserter(out));
  return out;
}

LoraLoaderComparison compare(const LoraFit& self, const LoraFit& other, const detail::LoraNames& names) {
  LoraLoaderComparison c;
  c.loader = other.loader;
  c.fails = !other.loader_failures.empty();
  const auto mine = loaded(self, names);
  const auto theirs = loaded(other, names);
  c.tensors_loaded = theirs.size();
  std::vector<std::string_view> a, b;
  std::set_difference(theirs.begin(), theirs.end(), mine.begin(), mine.end(), std::back_inserter(a));
  std::set_difference(mine.begin(), mine.end(), theirs.begin(), theirs.end(), std::back_inserter(b));
  c.only_other_loads.assign(a.begin(), a.end());
  c.only_this_loads.assign(b.begin(), b.end());
  const std::string who(lora_loader_name(other.loader));
  const std::string me(lora_loader_name(self.loader));
  if (c.fails) {
    c.summary = who + " would fail to load this LoRA: " + other.loader_failures.front().message;
  } else if (!c.only_other_loads.empty()) {
    c.summary = who + " would load these " + std::to_string(c.only_other_loads.size()) + " tensors";
    if (!c.only_this_loads.empty()) {
      c.summary += " and not " + std::to_string(c.only_this_loads.size()) + " that " + me + " loads";
    }
  } else if (!c.only_this_loads.empty()) {
    c.summary = who + " would not load " + std::to_string(c.only_this_loads.size()) + " of the tensors " + me + " loads";
  }
  return c;
}

}  // namespace

namespace detail {

LoraNames::LoraNames(const LoraFile& lora) {
  names_.reserve(lora.file().entries().size() * 2);
  sorted_.reserve(lora.file().entries().size());
  for (const SafetensorsEntry& e : lora.file().entries()) {
    names_.insert(e.name);
    sorted_.push_back(e.name);
  }
  if (!std::is_sorted(sorted_.begin(), sorted_.end())) std::sort(sorted_.begin(), sorted_.end());
}

void set_loaded(LoraFit& fit, const LoraNames& names, const std::unordered_set<std::string_view>& consumed) {
  fit.tensors_loaded = 0;
  fit.lora_keys_not_loaded.clear();
  for (std::string_view n : names.sorted()) {
    if (consumed.count(n) != 0) {
      ++fit.tensors_loaded;
    } else {
      fit.lora_keys_not_loaded.emplace_back(n);
    }
  }
}

void add_matched(LoraFit& fit, const ModelPatch& p) {
  const LoraModule& m = *p.module;
  const TensorView& t = p.tensor;
  if (p.swap || (p.weight && t.swapped)) {
    unsupported(fit, m.name, "the loader applies it through swap_scale_shift (rows swapped in halves); genscope does not merge that");
  }
  if (m.tensors.count("reshape_weight") != 0) {
    unsupported(fit, m.name, "reshape_weight pads the base weight to a new shape; genscope does not merge that");
  }
  std::string bias_key;
  if (p.bias) {
    const TensorView& b = *p.bias;
    const bool plain = b.kind == ModelTensor::Kind::kInFile && b.pieces.size() == 1 && b.pieces[0].rows == 0 &&
                       b.pieces[0].where.rows == 0 && b.pieces[0].where.chunks == 1 && !b.pieces[0].where.transpose;
    if (plain) {
      bias_key = b.pieces[0].where.key;
    } else {
      unsupported(fit, m.name, "its bias patch lands inside a fused tensor of the file (" + b.pieces[0].where.key + ")");
    }
  }
  if (!p.weight) {
    LoraKeyTarget target;
    target.key = bias_key;
    target.bias_key = bias_key;
    if (!bias_key.empty()) fit.matched.emplace_back(m.name, std::move(target));
    return;
  }
  // The window of the model tensor the delta covers.
  const std::int64_t total = t.shape.empty() ? 0 : t.shape[0];
  const std::int64_t w0 = p.rows > 0 ? p.offset : 0;
  const std::int64_t wr = p.rows > 0 ? p.rows : total;
  std::vector<std::int64_t> expected = t.shape;
  if (!expected.empty() && wr > 0) expected[0] = wr;
  std::vector<std::int64_t> delta = m.delta_shape;
  if (p.delta_rows > 0 && !delta.empty()) delta[0] = p.delta_rows;
  if (m.type != LoraModuleType::kNorm && !delta.empty() && !expected.empty() && !shape_fits(delta, expected)) {
    fit.shape_mismatches.push_back(m.name + ": delta " + shape_text(delta) + " vs weight '" +
                                   t.pieces.front().where.key + "'" + (p.rows > 0 ? " rows window" : "") + " " +
                                   shape_text(expected));
  }
  if (t.kind == ModelTensor::Kind::kIdentity) {
    // ComfyUI's CLIPTextModel builds text_projection as an identity Linear; the file has none.
    const std::string_view key = p.patch_key;
    const std::size_t tower_end = key.find('.');
    fit.builtin_patched.push_back({m.name, p.patch_key,
                                   "the " + std::string(key.substr(0, tower_end)) +
                                       " text encoder's built-in text_projection (identity-initialised; not in the file)"});
  }
  if (t.pieces.size() == 1 && t.pieces[0].rows == 0) {
    LoraKeyTarget target = t.pieces[0].where;
    if (p.rows > 0) {
      // Compose the loader's window with where the model tensor sits in the file tensor.
      std::int64_t base_row = target.row_offset;
      if (target.rows == 0 && target.chunks > 1) base_row = static_cast<std::int64_t>(target.chunk) * total;
      target.chunk = 0;
      target.chunks = 1;
      target.row_offset = base_row + p.offset;
      target.rows = p.rows;
    }
    target.bias_key = bias_key;
    if (p.delta_rows > 0) {
      target.delta_row_offset = p.delta_row;
      if (target.rows == 0) {  // the slice covers the whole file tensor: name its rows
        target.row_offset = target.chunks > 1 ? target.chunk * total : 0;
        target.rows = total;
        target.chunk = 0;
        target.chunks = 1;
      }
    }
    fit.matched.emplace_back(m.name, std::move(target));
    return;
  }
  // A fused model weight the file stores split: one entry per file tensor the window crosses.
  bool first = true;
  for (const ModelPiece& piece : t.pieces) {
    const std::int64_t a = std::max(w0, piece.model_row);
    const std::int64_t b = std::min(w0 + wr, piece.model_row + piece.rows);
    if (a >= b) continue;
    LoraKeyTarget target = piece.where;
    target.row_offset = a - piece.model_row;
    target.rows = b - a;
    target.delta_row_offset = a - w0 + p.delta_row;
    if (first) target.bias_key = bias_key;
    first = false;
    fit.matched.emplace_back(m.name, std::move(target));
  }
}

}  // namespace detail

std::vector<LoraPatchedTensor> LoraFit::patched_tensors() const {
  std::vector<LoraPatchedTensor> out;
  for (const auto& [module, target] : matched) {
    // A bias-only module's target names its bias twice; a built-in weight is no file tensor.
    if (!target.materialize_identity && target.key != target.bias_key) out.push_back({target.key, module, false});
    if (!target.bias_key.empty()) out.push_back({target.bias_key, module, true});
  }
  return out;
}

bool LoraFit::fits() const noexcept {
  return !architecture_mismatch && loader_failures.empty() && lora_keys_not_loaded.empty() && not_loaded.empty() &&
         missing_from_file.empty() && shadowed.empty() && shape_mismatches.empty() && !matched.empty();
}

LoraFit fit_lora(const LoraFile& lora, const SafetensorsFile& base, LoraLoader loader, bool compare_other_loader) {
  const detail::BaseFile file(base);
  const detail::LoraNames names(lora);
  const bool comfy = loader == LoraLoader::kComfyUI;
  const auto model_of = [&file](LoraLoader l) {
    return l == LoraLoader::kComfyUI ? detail::comfy_model(file) : detail::diffusers_model(file);
  };
  // The other loader is compared by the tensors it loads (no targets, no verdict). Both fits
  // only read `file`, `names` and `lora`: the other one runs on a second thread meanwhile
  // (here, when no thread can be started).
  std::future<LoraFit> other;
  if (compare_other_loader) {
    other = std::async(std::launch::async | std::launch::deferred, [&] {
      const detail::LoaderModel other_model = model_of(comfy ? LoraLoader::kDiffusers : LoraLoader::kComfyUI);
      return comfy ? detail::fit_diffusers(lora, names, other_model, false)
                   : detail::fit_comfyui(lora, names, other_model, false);
    });
  }
  const detail::LoaderModel model = model_of(loader);
  LoraFit self = comfy ? detail::fit_comfyui(lora, names, model) : detail::fit_diffusers(lora, names, model);
  finish(self, lora, base, !model.towers.empty());
  if (other.valid()) self.other_loader = compare(self, other.get(), names);
  return self;
}

namespace {

std::set<std::string> modules_of(const LoraFit& fit) {
  std::set<std::string> out;
  for (const auto& [module, target] : fit.matched) out.insert(module);
  return out;
}

nlohmann::json target_json(const std::string& module, const LoraKeyTarget& target) {
  nlohmann::json t{{"module", module}, {"key", target.key}};
  if (target.chunks > 1) {
    t["chunk"] = target.chunk;
    t["chunks"] = target.chunks;
  }
  if (target.rows > 0) {
    t["row_offset"] = target.row_offset;
    t["rows"] = target.rows;
    if (target.delta_row_offset != 0) t["delta_row_offset"] = target.delta_row_offset;
  }
  if (!target.bias_key.empty()) t["bias_key"] = target.bias_key;
  if (target.transpose) t["transpose"] = true;
  if (target.materialize_identity) {
    t["materialize_identity"] = true;
    t["shape"] = target.shape;
  }
  return t;
}

}  // namespace

void to_json(nlohmann::json& j, const LoraFit& fit) {
  nlohmann::json matched = nlohmann::json::array();
  for (const auto& [module, target] : fit.matched) matched.push_back(target_json(module, target));
  nlohmann::json patched = nlohmann::json::array();
  for (const LoraPatchedTensor& t : fit.patched_tensors()) {
    patched.push_back({{"key", t.key}, {"module", t.module}, {"patch", t.bias ? "bias" : "weight"}});
  }
  nlohmann::json builtin = nlohmann::json::array();
  for (const auto& b : fit.builtin_patched) builtin.push_back({{"module", b.module}, {"weight", b.weight}, {"what", b.what}});
  nlohmann::json shadowed = nlohmann::json::array();
  for (const auto& s : fit.shadowed) shadowed.push_back({{"module", s.module}, {"by", s.by}, {"key", s.key}});
  const auto failures_json = [](const std::vector<LoraLoaderFailure>& list) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& f : list) out.push_back({{"module", f.module}, {"error", f.error}, {"message", f.message}});
    return out;
  };
  j = nlohmann::json{{"loader", lora_loader_name(fit.loader)},
                     {"lora_architecture", model_arch_name(fit.lora_arch)},
                     {"base_architecture", model_arch_name(fit.base_arch)},
                     {"architecture_mismatch", fit.architecture_mismatch},
                     {"verdict", fit.verdict},
                     {"fits", fit.fits()},
                     {"base_keys", fit.base_keys},
                     {"base_weights_patched", fit.base_weights_patched},
                     {"lora_tensors", fit.lora_tensors},
                     {"tensors_loaded", fit.tensors_loaded},
                     {"matched_count", fit.matched.size()},
                     {"modules_applied", modules_of(fit).size()},
                     {"lora_key_not_loaded_count", fit.lora_keys_not_loaded.size()},
                     {"not_loaded_count", fit.not_loaded.size()},
                     {"missing_from_file_count", fit.missing_from_file.size()},
                     {"builtin_patched_count", fit.builtin_patched.size()},
                     {"shadowed_count", fit.shadowed.size()},
                     {"shape_mismatch_count", fit.shape_mismatches.size()},
                     {"matched", std::move(matched)},
                     {"patched", std::move(patched)},
                     {"lora_key_not_loaded", fit.lora_keys_not_loaded},
                     {"not_loaded", fit.not_loaded},
                     {"missing_from_file", fit.missing_from_file},
                     {"builtin_patched", std::move(builtin)},
                     {"shadowed", std::move(shadowed)},
                     {"loader_failures", failures_json(fit.loader_failures)},
                     {"merge_unsupported", failures_json(fit.merge_unsupported)},
                     {"shape_mismatches", fit.shape_mismatches}};
  if (fit.other_loader) {
    const LoraLoaderComparison& o = *fit.other_loader;
    j["other_loader"] = nlohmann::json{{"loader", lora_loader_name(o.loader)},
                                       {"tensors_loaded", o.tensors_loaded},
                                       {"fails", o.fails},
                                       {"only_other_loads", o.only_other_loads},
                                       {"only_this_loads", o.only_this_loads},
                                       {"summary", o.summary}};
  } else {
    j["other_loader"] = nullptr;
  }
}

}  // namespace genscope
