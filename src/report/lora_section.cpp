// Console rendering of "lora_application" attachments: seed 002's summary — success, the LoRA
// file, identity changes (clone, patch count, patches UUID), patched keys, weight changes,
// keys not loaded, placement, memory impact, fit verdict and errors.
//
// Two layouts carry this type: the library's lora_application_report() (schema
// "genscope.lora_application/1": unet_changes, unet_weight_changes, unet_lora_patches,
// placement_changes, memory_impact, fit; docs/lora.md) and the reference pipeline's
// (identity, weights, patches, key_mapping, placement; docs/demo.md). The same figures are
// read from either.
#include <cmath>
#include <map>
#include <set>

#include "report/console_style.hpp"
#include "report/json_fields.hpp"

namespace genscope::detail {
namespace {

using nlohmann::json;

constexpr std::size_t kListed = 5;  // keys listed before "... and N more" (all with --verbose)

const json& object_or_null(const json& d, const char* a, const char* b = nullptr) {
  static const json null;
  if (const json* v = field(d, a); v != nullptr && v->is_object()) return *v;
  if (b != nullptr) {
    if (const json* v = field(d, b); v != nullptr && v->is_object()) return *v;
  }
  return null;
}

std::string short_uuid(const std::string& u) { return u.size() > 8 ? u.substr(0, 8) : u; }

std::string identity_line(const json& id, const json& before, const json& after,
                          const ConsoleStyle& s) {
  std::string t = field_bool(id, "model_cloned") ? "cloned" : "same object";
  const double from = field_number(id, "original_patch_count");
  const double to = field_number(id, "modified_patch_count");
  if (!std::isnan(from) && !std::isnan(to)) {
    t += ", patched keys " + format_count(from) + " " + s.arrow() + " " + format_count(to);
    const double added = field_number(id, "patches_added");
    if (!std::isnan(added)) t += " (" + std::string(added >= 0 ? "+" : "") + format_count(added) + ")";
  }
  if (field_bool(id, "uuid_changed")) {
    const std::string u0 = field_text(before, "patches_uuid");
    const std::string u1 = field_text(after, "patches_uuid");
    t += ", patches UUID changed";
    if (!u0.empty() && !u1.empty()) {
      t += " (" + short_uuid(u0) + s.mark("…", "...") + " " + s.arrow() + " " + short_uuid(u1) +
           s.mark("…", "...") + ")";
    }
  } else {
    t += ", patches UUID unchanged";
  }
  t += field_bool(id, "class_changed") ? ", CLASS CHANGED" : ", class unchanged";
  return t;
}

void render_patches(std::string& out, const json& patches, const ConsoleStyle& s,
                    const std::string& in) {
  if (!patches.is_object()) return;
  const json* details = field(patches, "patch_details");
  std::map<std::string, int> types;
  std::set<std::string> ranks, strengths;
  if (details != nullptr && details->is_object()) {
    for (const auto& [key, p] : details->items()) {
      ++types[field_text(p, "patch_type").empty() ? "unknown" : field_text(p, "patch_type")];
      if (const json* r = field(p, "rank"); r != nullptr && r->is_number()) ranks.insert(format_number(r->get<double>()));
      if (const json* v = field(p, "strength_patch"); v != nullptr && v->is_number()) {
        strengths.insert(format_number(v->get<double>()));
      }
    }
  }
  const json* total_field = field(patches, "total_patched_keys");
  if (total_field != nullptr && total_field->is_null()) return;  // no patcher was observed
  double total = field_number(patches, "total_patched_keys");
  if (std::isnan(total) && details != nullptr) total = static_cast<double>(details->size());
  std::string t = "Patched keys: " + format_count(total);
  if (!types.empty()) {
    t += " (";
    bool first = true;
    for (const auto& [type, n] : types) {
      t += (first ? "" : ", ") + type + " " + s.mark("×", "x") + std::to_string(n);
      first = false;
    }
    t += ")";
  }
  auto join = [](const std::set<std::string>& v) {
    std::string r;
    for (const std::string& x : v) r += (r.empty() ? "" : "/") + x;
    return r;
  };
  if (!ranks.empty()) t += ", rank " + join(ranks);
  if (!strengths.empty()) t += ", strength " + join(strengths);
  out += in + t + "\n";
  json keys = json::array();
  if (const json* targeted = field(patches, "targeted_keys"); targeted != nullptr && targeted->is_array()) {
    keys = *targeted;
  } else if (details != nullptr && details->is_object()) {
    for (const auto& [key, p] : details->items()) keys.push_back(key);
  }
  render_list(out, keys, in + "   ", s.verbose ? keys.size() : kListed, s.plain);
}

void render_weights(std::string& out, const json& w, const std::string& in) {
  if (!w.is_object()) return;
  const json* changes = field(w, "changes");
  std::size_t values = 0, shapes = 0, dtypes = 0, devices = 0;
  if (changes != nullptr && changes->is_object()) {
    for (const auto& [key, c] : changes->items()) {
      // "value_changed" in the library's WeightDiff, "values_changed" in the pipeline's.
      values += field_bool(c, "value_changed") || field_bool(c, "values_changed");
      shapes += field_bool(c, "shape_changed");
      dtypes += field_bool(c, "dtype_changed");
      devices += field_bool(c, "device_changed");
    }
  }
  double changed = field_number(w, "values_changed");
  if (std::isnan(changed)) changed = static_cast<double>(values);
  std::string t = "Weights: " + format_count(changed) + " of " +
                  format_count(field_number(w, "keys_common")) + " common keys changed value; " +
                  std::to_string(field_size(w, "keys_added")) + " added, " +
                  std::to_string(field_size(w, "keys_removed")) + " removed";
  if (shapes + dtypes + devices == 0) {
    t += "; no shape, dtype or device change";
  } else {
    t += "; " + std::to_string(shapes) + " shape, " + std::to_string(dtypes) + " dtype, " +
         std::to_string(devices) + " device changes";
  }
  out += in + t + "\n";
}

void render_not_loaded(std::string& out, const char* title, const json* list, const ConsoleStyle& s,
                       const std::string& in) {
  if (list == nullptr || !list->is_array() || list->empty()) return;
  out += in + s.mark("⚠️  ", "! ") + title + " (" + std::to_string(list->size()) + "):\n";
  render_list(out, *list, in + "   ", s.verbose ? list->size() : kListed, s.plain);
}

void render_key_mapping(std::string& out, const json& d, const ConsoleStyle& s,
                        const std::string& in) {
  if (const json& m = object_or_null(d, "key_mapping"); m.is_object()) {  // reference pipeline
    const json* nl = field(m, "lora_keys_not_loaded");
    out += in + "Key mapping: " + format_count(field_number(m, "lora_modules")) + " LoRA modules " +
           s.arrow() + " " + format_count(field_number(m, "mapped_keys")) + " model keys; " +
           (nl != nullptr && nl->is_array() && !nl->empty()
                ? std::to_string(nl->size()) + " LoRA keys not loaded"
                : std::string("every LoRA key loaded")) +
           (field_bool(m, "architecture_fits", true) ? "" : "; the LoRA does NOT fit this model") +
           "\n";
    render_not_loaded(out, "lora key not loaded", nl, s, in);
  }
  if (const json& f = object_or_null(d, "fit"); f.is_object()) {  // library: LoraFit
    out += in + "Fit: " + field_text(f, "lora_architecture") + " LoRA on a " +
           field_text(f, "base_architecture") + " base, " + format_count(field_number(f, "matched_count")) +
           " modules matched " + s.arrow() + " " + format_count(field_number(f, "base_weights_patched")) +
           " of " + format_count(field_number(f, "base_keys")) + " base weights; " +
           (field_bool(f, "fits") ? "fits" : "does NOT fit") + "\n";
    if (!field_text(f, "verdict").empty()) out += in + "   verdict: " + field_text(f, "verdict") + "\n";
    render_not_loaded(out, "lora key not loaded", field(f, "lora_key_not_loaded"), s, in);
    render_not_loaded(out, "NOT LOADED", field(f, "not_loaded"), s, in);
    render_not_loaded(out, "shape mismatches", field(f, "shape_mismatches"), s, in);
  }
}

std::string moved(const json& p, const char* what, const char* from, const char* to,
                  const char* changed, const ConsoleStyle& s) {
  const std::string a = field_text(p, from), b = field_text(p, to);
  if (a.empty() && b.empty()) return {};
  std::string t = std::string(what) + " " + a;
  if (field_bool(p, changed)) t.append(" ").append(s.arrow()).append(" ").append(b).append(" (CHANGED)");
  return t;
}

void render_placement(std::string& out, const json& d, const ConsoleStyle& s, const std::string& in) {
  const json& unet = object_or_null(object_or_null(d, "placement_changes"), "unet");
  const json& p = unet.is_object() ? unet : object_or_null(d, "placement");
  if (!p.is_object()) return;
  std::string t = "Placement: " + moved(p, "model", "original_device", "modified_device", "model_device_changed", s);
  const std::string load = moved(p, "load", "original_load_device", "modified_load_device",
                                 "load_device_changed", s);
  const std::string off = moved(p, "offload", "original_offload_device", "modified_offload_device",
                                "offload_device_changed", s);
  if (!load.empty()) t += ", " + load;
  if (!off.empty()) t += ", " + off;
  const bool any = field_bool(p, "model_device_changed") || field_bool(p, "load_device_changed") ||
                   field_bool(p, "offload_device_changed");
  t += any ? "" : " (unchanged)";
  const json& clip_p = object_or_null(object_or_null(d, "placement_changes"), "clip");
  const json& c = clip_p.is_object() ? clip_p : p;
  if (!field_text(c, "clip_model_device").empty()) {
    t += "; CLIP on " + field_text(c, "clip_model_device") + " (load " +
         field_text(c, "clip_patcher_load_device") + ", offload " +
         field_text(c, "clip_patcher_offload_device") + ")";
  }
  out += in + t + "\n";
}

void render_memory_impact(std::string& out, const json& d, const std::string& in) {
  const json& m = object_or_null(object_or_null(d, "memory_impact"), "unet_memory_change");
  if (!m.is_object()) return;
  const double alloc = field_number(m, "allocated_change_bytes");
  const double reserved = field_number(m, "reserved_change_bytes");
  if (std::isnan(alloc) && std::isnan(reserved)) return;  // no framework allocator figures
  out += in + "Memory: allocated " + format_bytes(alloc, true) + ", reserved " +
         format_bytes(reserved, true) + " (now " +
         format_bytes(field_number(m, "current_allocated_mb") * 1024 * 1024) + " allocated, " +
         format_bytes(field_number(m, "current_reserved_mb") * 1024 * 1024) + " reserved)\n";
}

}  // namespace

void render_lora_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                            const std::string& indent) {
  const json& d = a.data;
  const std::string in = indent + "   ";
  const json* success = field(d, "lora_application_success");
  const bool ok = success == nullptr || !success->is_boolean() || success->get<bool>();
  out += indent + s.mark("🔧 ", "") + "LORA APPLICATION \"" + a.name + "\": " +
         (ok ? s.mark("✅ applied", "applied") : s.mark("❌ NOT applied", "NOT applied"));
  if (!std::isnan(field_number(d, "strength_model"))) {
    out += ", strength model " + format_number(field_number(d, "strength_model")) + ", clip " +
           format_number(field_number(d, "strength_clip"));
  }
  if (!std::isnan(field_number(d, "models_returned"))) {
    out += ", " + format_count(field_number(d, "models_returned")) + " model(s) returned";
  }
  out += "\n";
  const json& baseline = object_or_null(d, "baseline");
  const json& file = object_or_null(d, "lora_file").is_object() ? object_or_null(d, "lora_file")
                                                                 : object_or_null(baseline, "lora_file");
  if (file.is_object()) {
    out += in + "LoRA file: " + field_text(file, "filename") + " (" +
           (field_bool(file, "file_exists") ? format_bytes(field_number(file, "file_size_bytes"))
                                            : std::string("MISSING")) +
           ")\n";
  }
  const json& before = object_or_null(baseline, "unet");
  const json& after = object_or_null(object_or_null(d, "modified"), "unet");
  if (const json& id = object_or_null(d, "identity", "unet_changes"); id.is_object()) {
    out += in + "UNet: " + identity_line(id, before, after, s) + "\n";
  }
  if (const json& clip = object_or_null(d, "clip_changes"); clip.is_object()) {
    out += in + "CLIP: " + identity_line(clip, object_or_null(baseline, "clip"), json(), s) + "\n";
  }
  render_patches(out, object_or_null(d, "patches", "unet_lora_patches"), s, in);
  if (const json& clip = object_or_null(d, "clip_lora_patches"); clip.is_object()) {
    out += in + "CLIP patches: " + format_count(field_number(clip, "total_patched_keys")) + " keys\n";
  }
  render_weights(out, object_or_null(d, "weights", "unet_weight_changes"), in);
  render_key_mapping(out, d, s, in);
  render_placement(out, d, s, in);
  render_memory_impact(out, d, in);
  if (const json* errors = field(d, "errors"); errors != nullptr && errors->is_array()) {
    for (const json& e : *errors) {
      out += in + s.mark("❌ ", "! ") + "error: " + (e.is_string() ? e.get<std::string>() : e.dump()) + "\n";
    }
  }
}

}  // namespace genscope::detail
