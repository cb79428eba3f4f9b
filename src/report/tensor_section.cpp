// Console rendering of tensor attachments: the seed 000 / 001 tensor sections ("tensor": shape,
// dtype, device, size, elements, family, compression ratios, statistics, flags, checks),
// seed 001's latent output analysis ("latent": the same plus strategy, input and ratios) and
// tensor comparisons ("tensor_comparison").
#include <cctype>
#include <cmath>

#include "report/console_style.hpp"
#include "report/json_fields.hpp"

namespace genscope::detail {
namespace {

using nlohmann::json;

std::string num(const json& j, const char* key) { return format_number(field_number(j, key)); }

std::string count(const json& j, const char* key) {
  const double v = field_number(j, key);
  return format_count(std::isnan(v) ? 0.0 : v);
}

std::string shape_text(const json& d) {
  const json* shape = field(d, "shape");
  return shape != nullptr ? format_field("shape", *shape, true) : "[]";
}

void render_family(std::string& out, const json& c, const std::string& in) {
  if (!c.is_object()) return;
  const std::string family = field_text(c, "family");
  std::string candidates;
  if (const json* list = field(c, "candidates"); list != nullptr && list->is_array()) {
    for (const json& f : *list) candidates += (candidates.empty() ? "" : ", ") + field_text(f, "family");
  }
  if (!family.empty()) {
    out += in + "Model family: " + family + "\n";
  } else if (!candidates.empty()) {
    out += in + "Model family: ambiguous, one of " + candidates + "\n";
  } else {
    out += in + "Model family: unknown (no known family has this shape)\n";
  }
  if (field_text(c, "kind") == "latent") {
    out += in + "Latent type: " + field_text(c, "layout");
    if (field_number(c, "channels") > 0) out += ", " + count(c, "channels") + " channels";
    out += "\n";
    if (!std::isnan(field_number(c, "spatial_ratio"))) {
      out += in + "Spatial compression: " + num(c, "spatial_ratio") + "x";
      if (!std::isnan(field_number(c, "temporal_ratio"))) {
        out += ", temporal compression: " + num(c, "temporal_ratio") + "x";
      }
      out += "\n";
    }
  }
  if (const json* notes = field(c, "notes"); notes != nullptr && notes->is_array()) {
    for (const json& n : *notes) {
      if (n.is_string()) out += in + "note: " + n.get<std::string>() + "\n";
    }
  }
}

// The lines every tensor analysis shares (after the title line).
void render_tensor_body(std::string& out, const json& d, const ConsoleStyle& s,
                        const std::string& in) {
  const json stats = d.value("stats", json::object());
  out += in + "Shape: " + shape_text(d) + ", dtype " + field_text(d, "dtype") + ", device " +
         field_text(d, "device") + ", " + format_bytes(field_number(stats, "bytes")) + ", " +
         count(stats, "numel") + " elements\n";
  render_family(out, d.value("classification", json()), in);
  out += in + "Stats: min " + num(stats, "min") + ", max " + num(stats, "max") + ", mean " +
         num(stats, "mean") + ", std " + num(stats, "std") + ", |max| " + num(stats, "abs_max") +
         "\n";
  out += in + "NaN " + count(stats, "nan_count") + ", +Inf " + count(stats, "pos_inf_count") +
         ", -Inf " + count(stats, "neg_inf_count") + ", zeros " + count(stats, "zero_count");
  if (!field_text(stats, "hash").empty()) out += ", hash " + field_text(stats, "hash");
  out += "\n";
  if (const json* flags = field(d, "flags"); flags != nullptr && flags->is_array()) {
    for (const json& f : *flags) {
      out += in + s.mark("⚠️  ", "! ") + field_text(f, "name") + ": " + field_text(f, "message") + "\n";
    }
  }
  if (const json* checks = field(d, "checks"); checks != nullptr && checks->is_array()) {
    for (const json& c : *checks) {
      const bool passed = field_bool(c, "passed");
      out += in + (passed ? s.mark("✅ ", "[pass] ") : s.mark("❌ ", "[FAIL] ")) +
             field_text(c, "name") + ": " + field_text(c, "reason") + "\n";
    }
  }
  if (!field_text(d, "note").empty()) out += in + "note: " + field_text(d, "note") + "\n";
  if (const json* dump = field(d, "dump"); dump != nullptr && dump->is_object()) {
    out += in + "Dumped to " + field_text(*dump, "path") + "\n";
  } else if (!field_text(d, "dump").empty()) {
    out += in + "Dumped to " + field_text(d, "dump") + "\n";
  }
}

}  // namespace

void render_tensor_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                              const std::string& indent) {
  out += indent + s.mark("📐 ", "") + "TENSOR \"" + a.name + "\" (" + field_text(a.data, "role") +
         ")\n";
  render_tensor_body(out, a.data, s, indent + "   ");
}

void render_latent_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                              const std::string& indent) {
  const json& d = a.data;
  const std::string in = indent + "   ";
  std::string kind = field_text(d, "latent_kind");
  if (!kind.empty()) kind[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(kind[0])));
  out += indent + s.mark("🌫️  ", "") + "LATENT \"" + a.name + "\"" +
         (kind.empty() ? "" : ": " + kind + " latent " + field_text(d, "latent_layout")) + "\n";
  if (!field_text(d, "strategy").empty()) {
    out += in + "Strategy used: " + field_text(d, "strategy") + "\n";
  }
  if (const json* input = field(d, "input"); input != nullptr && input->is_object()) {
    out += in + "Input: " + count(*input, "frames") + " frame(s) of " + num(*input, "width") + "x" +
           num(*input, "height") + ", " + count(*input, "channels") + " channels, " +
           format_bytes(field_number(*input, "bytes")) + "\n";
  }
  render_tensor_body(out, d, s, in);
  // The classification prints the ratios it derived; these are the pipeline's own figures,
  // shown when the classification has none (an unknown latent layout).
  const json* cls = field(d, "classification");
  const bool classified = cls != nullptr && !std::isnan(field_number(*cls, "spatial_ratio"));
  if (!classified && !std::isnan(field_number(d, "spatial_compression"))) {
    out += in + "Compression: spatial " + num(d, "spatial_compression") + "x";
    if (!std::isnan(field_number(d, "temporal_compression"))) {
      out += ", temporal " + num(d, "temporal_compression") + "x (" + count(d, "input_frames") +
             " frames " + s.arrow() + " " + count(d, "latent_frames") + ")";
    }
    out += "\n";
  }
  if (!field_text(d, "warning").empty()) {
    out += in + s.mark("⚠️  ", "! ") + field_text(d, "warning") + "\n";
  }
}

void render_comparison_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                                  const std::string& indent) {
  const json& d = a.data;
  const std::string in = indent + "   ";
  const bool close = field_bool(d, "allclose");
  out += indent + s.mark("🔬 ", "") + "COMPARISON \"" + a.name + "\": " +
         (close ? s.mark("✅ allclose", "allclose") : s.mark("❌ differs", "DIFFERS")) + "\n";
  if (!field_bool(d, "shape_match", true)) out += in + "shapes differ\n";
  if (!field_bool(d, "dtype_match", true)) out += in + "dtypes differ\n";
  const json* rel = field(d, "max_rel_error");
  const json* psnr = field(d, "psnr_db");
  out += in + "max |a-b| " + num(d, "max_abs_error") + ", mean " + num(d, "mean_abs_error") +
         ", RMSE " + num(d, "rmse") + ", max rel " +
         (rel != nullptr ? format_field("", *rel, s.plain) : "n/a") + ", cosine " +
         num(d, "cosine_similarity") + ", PSNR " +
         (psnr != nullptr ? format_field("", *psnr, s.plain) : "n/a") + " dB\n";
  out += in + "mismatches " + count(d, "mismatch_count") + " of " + count(d, "compared_count") +
         " compared (NaN positions differing: " + count(d, "nan_mismatch_count") + ")";
  if (field_number(d, "mismatch_count") > 0) {
    out += ", worst at index " + num(d, "worst_index") + ": " + num(d, "worst_a") + " vs " +
           num(d, "worst_b");
  }
  out += "\n";
}

}  // namespace genscope::detail
