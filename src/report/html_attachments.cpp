// The HTML report's sections drawn from attachments (see html_parts.hpp): tensor statistics
// and checks (docs/tensor-analysis.md layout), LoRA coverage ("lora_application", docs/lora.md),
// validation ("performance", docs/validation.md) and every other attachment as JSON. Fields
// are read defensively: a missing or mistyped field shows as "n/a", never as an error.
#include <cmath>
#include <cstdio>

#include "genscope/report.hpp"
#include "report/export_util.hpp"
#include "report/html_parts.hpp"

namespace genscope::detail {
namespace {

using nlohmann::json;

std::string esc(std::string_view text) {
  std::string out;
  append_html(out, text);
  return out;
}

const json& field(const json& j, const char* key) {
  static const json kNull;
  return j.is_object() && j.contains(key) ? j[key] : kNull;
}

double number(const json& j, const char* key) {
  const json& v = field(j, key);
  return v.is_number() ? v.get<double>() : kNaN;
}

std::string text(const json& j, const char* key) {
  const json& v = field(j, key);
  return v.is_string() ? v.get<std::string>() : "";
}

std::string fixed(double v, const char* format) {
  if (!std::isfinite(v)) return "n/a";
  char buf[48];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string td_num(const std::string& s) { return "<td class=\"num\">" + s + "</td>"; }

bool is_tensor(const Attachment& a) {
  return a.type == "tensor" ||
         (field(a.data, "stats").is_object() && field(a.data, "shape").is_array());
}

std::string shape_text(const json& shape) {
  std::string s;
  if (shape.is_array()) {
    for (const json& d : shape) s += (s.empty() ? "" : "×") + d.dump();
  }
  return "[" + s + "]";
}

std::string count_text(const json& stats, const char* key) {
  const double v = number(stats, key);
  return std::isfinite(v) ? fixed(v, "%.0f") : "n/a";
}

std::string list_details(const char* summary, const json& items) {
  if (!items.is_array() || items.empty()) return "";
  std::string out = "<details><summary>" + std::string(summary) + " (" +
                    std::to_string(items.size()) + ")</summary><ul>";
  for (const json& i : items)
    out += "<li>" + esc(i.is_string() ? i.get<std::string>() : i.dump()) + "</li>";
  return out + "</ul></details>";
}

template <typename Fn>
void each_attachment(std::span<const Run> runs, Fn fn) {
  for (std::size_t r = 0; r < runs.size(); ++r) {
    for (const StepRecord& s : runs[r].steps) {
      for (const Attachment& a : s.attachments) fn(r, &s, a);
    }
    for (const Attachment& a : runs[r].attachments) fn(r, nullptr, a);
  }
}

std::string where(std::span<const Run> runs, std::size_t r, const StepRecord* s) {
  std::string w = runs.size() > 1 ? run_letter(r) + ": " : "";
  return w + (s ? esc(s->name) : "run");
}

std::string target_value(const std::string& target, double v) {
  if (target.rfind("max_peak", 0) == 0) return esc(format_bytes(v));
  if (target == "min_it_per_s") return fixed(v, "%.2f it/s");
  if (target == "max_duration" || target == "window") return esc(format_duration(v));
  return fixed(v, "%g");
}

// A count given as a number or as the list of what is counted.
double count(const json& j, const char* key) {
  const json& v = field(j, key);
  return v.is_array() ? static_cast<double>(v.size()) : number(j, key);
}

void model_changes(std::string& out, const char* model, const json& patches, const json& weights) {
  if (!patches.is_object() && !weights.is_object()) return;
  const double changed = field(weights, "keys_changed").is_array()
                             ? count(weights, "keys_changed")
                             : number(weights, "values_changed");
  out += "<tr><td>" + std::string(model) + "</td>" +
         td_num(fixed(number(patches, "total_patched_keys"), "%.0f")) +
         td_num(fixed(changed, "%.0f")) + td_num(fixed(count(weights, "keys_common"), "%.0f")) +
         td_num(fixed(count(weights, "keys_added"), "%.0f")) +
         td_num(fixed(count(weights, "keys_removed"), "%.0f")) + "</tr>";
}

}  // namespace

std::string html_tensor_section(std::span<const Run> runs) {
  std::string rows;
  each_attachment(runs, [&](std::size_t r, const StepRecord* s, const Attachment& a) {
    if (!is_tensor(a)) return;
    const json& d = a.data;
    const json& stats = field(d, "stats");
    const json& cls = field(d, "classification");
    std::string family = text(cls, "family");
    if (family.empty() && field(cls, "candidates").is_array() &&
        !field(cls, "candidates").empty()) {
      family = "one of";
      for (const json& c : field(cls, "candidates")) family += " " + text(c, "family");
    }
    std::string checks;
    if (field(d, "checks").is_array()) {
      for (const json& c : field(d, "checks")) {
        const bool passed = field(c, "passed").is_boolean() && field(c, "passed").get<bool>();
        checks += std::string("<span class=\"") + (passed ? "ok" : "fail") + "\" title=\"" +
                  esc(text(c, "reason")) + "\">" + esc(text(c, "name")) +
                  (passed ? " &#10003;" : " &#10007;") + "</span> ";
      }
    }
    if (field(d, "flags").is_array()) {
      for (const json& f : field(d, "flags")) {
        checks += "<span class=\"fail\" title=\"" + esc(text(f, "message")) + "\">&#9888; " +
                  esc(text(f, "name")) + "</span> ";
      }
    }
    rows += "<tr><td>" + where(runs, r, s) + "</td><td>" + esc(a.name) + "</td><td>" +
            esc(text(d, "role")) + "</td><td>" + esc(shape_text(field(d, "shape"))) + "</td><td>" +
            esc(text(d, "dtype")) + " " + esc(text(d, "device")) + "</td>" +
            td_num(esc(format_bytes(number(stats, "bytes")))) +
            td_num(fixed(number(stats, "min"), "%.4g")) +
            td_num(fixed(number(stats, "max"), "%.4g")) +
            td_num(fixed(number(stats, "mean"), "%.4g")) +
            td_num(fixed(number(stats, "std"), "%.4g")) + td_num(count_text(stats, "nan_count")) +
            td_num(fixed(number(stats, "pos_inf_count") + number(stats, "neg_inf_count"), "%.0f")) +
            td_num(count_text(stats, "zero_count")) + "<td>" + esc(family) + "</td><td>" + checks +
            "</td></tr>";
  });
  if (rows.empty()) return "";
  return "<div class=\"scroll\"><table class=\"tensors\"><thead><tr><th>step</th><th>tensor</th>"
         "<th>role</th><th>shape</th><th>dtype, device</th><th class=\"num\">size</th>"
         "<th class=\"num\">min</th><th class=\"num\">max</th><th class=\"num\">mean</th>"
         "<th class=\"num\">std</th><th class=\"num\">NaN</th><th class=\"num\">&plusmn;Inf</th>"
         "<th class=\"num\">zeros</th><th>family</th><th>checks and "
         "flags</th></tr></thead><tbody>" +
         rows + "</tbody></table></div>";
}

// Two layouts carry a LoRA application: seed 002's report (lora_report.cpp: "fit",
// "unet_lora_patches", "unet_weight_changes", ...) and the reference pipeline's
// (integrations/libtorch: "key_mapping", "patches", "weights"). Both are read.
std::string html_lora_section(std::span<const Run> runs) {
  std::string out;
  each_attachment(runs, [&](std::size_t r, const StepRecord* s, const Attachment& a) {
    if (a.type != "lora_application") return;
    const json& d = a.data;
    const json& file = field(d, "lora_file");
    const json& success = field(d, "lora_application_success");
    out += "<h3>" + (a.name.empty() ? std::string("LoRA application") : esc(a.name)) +
           " <span class=\"note\">in " + where(runs, r, s) + "</span></h3>";
    // No empty names: a LoRA whose file the attachment does not name says so.
    const std::string file_name =
        text(file, "path").empty() ? text(file, "filename") : text(file, "path");
    out += "<p>File " + (file_name.empty() ? std::string("<i>not named</i>") : esc(file_name)) +
           (number(file, "file_size_bytes") > 0
                ? ", " + esc(format_bytes(number(file, "file_size_bytes")))
                : "");
    if (success.is_boolean()) {
      out += std::string("; application ") + (success.get<bool>()
                                                  ? "<span class=\"ok\">succeeded</span>"
                                                  : "<span class=\"failed\">failed</span>");
    }
    out += "</p>";
    const json& fit = field(d, "fit");
    const json& mapping = field(d, "key_mapping");
    double modules = kNaN, loaded = kNaN, missing = kNaN, mismatches = kNaN;
    double base_keys = kNaN, patched = kNaN;
    std::string verdict, architectures;
    const json* unloaded_list = nullptr;
    if (fit.is_object()) {
      loaded = number(fit, "matched_count");
      modules = loaded + number(fit, "lora_key_not_loaded_count");
      missing = number(fit, "not_loaded_count");
      mismatches = number(fit, "shape_mismatch_count");
      base_keys = number(fit, "base_keys");
      patched = number(fit, "base_weights_patched");
      verdict = text(fit, "verdict");
      architectures = text(fit, "lora_architecture") + " / " + text(fit, "base_architecture");
      unloaded_list = &field(fit, "lora_key_not_loaded");
    } else if (mapping.is_object()) {
      modules = number(mapping, "lora_modules");
      loaded = number(mapping, "mapped_keys");
      missing = number(mapping, "not_loaded_count");
      unloaded_list = &field(mapping, "lora_keys_not_loaded");
      if (field(mapping, "architecture_fits").is_boolean()) {
        verdict = field(mapping, "architecture_fits").get<bool>()
                      ? "the LoRA's architecture fits the model"
                      : "the LoRA was made for another architecture";
      }
    }
    if (std::isfinite(modules)) {
      out += verdict.empty() ? "" : "<p>" + esc(verdict) + "</p>";
      out += "<table class=\"lora\"><tbody><tr><th>LoRA modules loaded</th>" +
             td_num(fixed(loaded, "%.0f") + " of " + fixed(modules, "%.0f") + " (" +
                    fixed(100 * loaded / modules, "%.1f %%") + ")") +
             "</tr>";
      if (std::isfinite(base_keys)) {
        out += "<tr><th>base weights patched</th>" +
               td_num(fixed(patched, "%.0f") + " of " + fixed(base_keys, "%.0f") + " (" +
                      fixed(100 * patched / base_keys, "%.1f %%") + ")") +
               "</tr>";
      }
      if (!architectures.empty()) {
        out += "<tr><th>architectures (LoRA / base)</th><td>" + esc(architectures) + "</td></tr>";
      }
      out += "<tr><th>\"lora key not loaded\"</th>" + td_num(fixed(modules - loaded, "%.0f")) +
             "</tr>";
      out += "<tr><th>NOT LOADED (keys the base lacks)</th>" + td_num(fixed(missing, "%.0f")) +
             "</tr>";
      if (std::isfinite(mismatches)) {
        out += "<tr><th>shape mismatches</th>" + td_num(fixed(mismatches, "%.0f")) + "</tr>";
      }
      out += "</tbody></table>";
      if (unloaded_list != nullptr) out += list_details("lora key not loaded", *unloaded_list);
      if (fit.is_object()) {
        out += list_details("NOT LOADED", field(fit, "not_loaded"));
        out += list_details("shape mismatches", field(fit, "shape_mismatches"));
      }
    }
    std::string models;
    model_changes(models, "unet", field(d, "unet_lora_patches"), field(d, "unet_weight_changes"));
    model_changes(models, "clip", field(d, "clip_lora_patches"), field(d, "clip_weight_changes"));
    model_changes(models, "model", field(d, "patches"), field(d, "weights"));
    if (!models.empty()) {
      out +=
          "<table class=\"lora-models\"><thead><tr><th>model</th><th class=\"num\">patched keys"
          "</th><th class=\"num\">weights changed</th><th class=\"num\">common keys</th>"
          "<th class=\"num\">keys added</th><th class=\"num\">keys removed</th></tr></thead>"
          "<tbody>" +
          models + "</tbody></table>";
    }
    out += list_details("errors", field(d, "errors"));
  });
  return out;
}

std::string html_validation_section(std::span<const Run> runs) {
  std::string out;
  each_attachment(runs, [&](std::size_t r, const StepRecord* s, const Attachment& a) {
    if (a.type != "performance") return;
    const json& d = a.data;
    const bool met = field(d, "met").is_boolean() && field(d, "met").get<bool>();
    out += "<p><span class=\"score\">" + fixed(number(d, "score"), "%.1f") + " / 100</span> " +
           (met ? "<span class=\"ok\">target met</span>"
                : "<span class=\"missed\">target missed</span>") +
           " <span class=\"note\">" + where(runs, r, s) +
           (text(d, "architecture").empty() ? "" : ", " + esc(text(d, "architecture"))) +
           "</span></p>";
    if (field(d, "results").is_array() && !field(d, "results").empty()) {
      out +=
          "<table class=\"targets\"><thead><tr><th>scope</th><th>target</th><th class=\"num\">"
          "limit</th><th class=\"num\">actual</th><th class=\"num\">score</th><th>met</th>"
          "<th>note</th></tr></thead><tbody>";
      for (const json& t : field(d, "results")) {
        const bool ok = field(t, "met").is_boolean() && field(t, "met").get<bool>();
        const std::string target = text(t, "target");
        out += "<tr><td>" + esc(text(t, "scope")) + "</td><td>" + esc(target) + "</td>" +
               td_num(target_value(target, number(t, "limit"))) +
               td_num(target_value(target, number(t, "actual"))) +
               td_num(fixed(number(t, "score"), "%.1f")) + "<td class=\"" +
               (ok ? "ok\">yes" : "missed\">no") + "</td><td>" + esc(text(t, "note")) +
               "</td></tr>";
      }
      out += "</tbody></table>";
    }
    if (field(d, "diagnostics").is_array() && !field(d, "diagnostics").empty()) {
      out += "<h3>Diagnostics</h3><ul>";
      for (const json& g : field(d, "diagnostics")) {
        out += "<li><b>" + esc(text(g, "id")) + "</b>" +
               (text(g, "step").empty() ? "" : " (" + esc(text(g, "step")) + ")") + ": " +
               esc(text(g, "message")) + "</li>";
      }
      out += "</ul>";
    }
    if (field(d, "recommendations").is_array() && !field(d, "recommendations").empty()) {
      out += "<h3>Recommendations</h3><ul>";
      for (const json& g : field(d, "recommendations"))
        out += "<li>" + esc(text(g, "text")) + "</li>";
      out += "</ul>";
    }
  });
  return out;
}

std::string html_other_attachments(std::span<const Run> runs) {
  constexpr std::size_t kMaxShown = 64 * 1024;  // bytes of JSON shown per attachment
  std::string out;
  each_attachment(runs, [&](std::size_t r, const StepRecord* s, const Attachment& a) {
    if (is_tensor(a) || a.type == "lora_application" || a.type == "performance") return;
    std::string body = a.data.dump(2, ' ', false, json::error_handler_t::replace);
    std::string more;
    if (body.size() > kMaxShown) {
      more = "\n… " + std::to_string(body.size() - kMaxShown) +
             " more bytes: the whole attachment is in the run document";
      body.resize(kMaxShown);
    }
    out += "<details><summary>" + esc(a.type) +
           (a.name.empty() ? "" : " &ldquo;" + esc(a.name) + "&rdquo;") +
           " <span class=\"note\">in " + where(runs, r, s) + "</span></summary><pre>" + esc(body) +
           esc(more) + "</pre></details>";
  });
  return out;
}

}  // namespace genscope::detail
