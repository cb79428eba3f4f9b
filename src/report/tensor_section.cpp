// Console rendering of "tensor" attachments: the seed 000 / 001 tensor sections (shape, dtype,
// device, size, elements, family, compression ratios, statistics, flags, checks).
#include <cmath>
#include <cstdio>

#include "genscope/report.hpp"
#include "report/console_style.hpp"

namespace genscope::detail {
namespace {

using nlohmann::json;

std::string num(const json& j, const char* key, const char* format = "%.4g") {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return "n/a";
  char buf[48];
  std::snprintf(buf, sizeof buf, format, j[key].get<double>());
  return buf;
}

std::string shape_text(const json& shape) {
  std::string s = "[";
  if (shape.is_array()) {
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + shape[i].dump();
  }
  return s + "]";
}

std::string thousands(std::int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (v < 0 ? "-" : "") + out;
}

std::string str(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

void render_family(std::string& out, const json& c, const std::string& in) {
  if (!c.is_object()) return;
  const std::string family = str(c, "family");
  std::string candidates;
  if (c.contains("candidates") && c["candidates"].is_array()) {
    for (const json& f : c["candidates"]) {
      candidates += (candidates.empty() ? "" : ", ") + str(f, "family");
    }
  }
  if (!family.empty()) {
    out += in + "Model family: " + family + "\n";
  } else if (!candidates.empty()) {
    out += in + "Model family: ambiguous, one of " + candidates + "\n";
  } else {
    out += in + "Model family: unknown (no known family has this shape)\n";
  }
  if (str(c, "kind") == "latent") {
    out += in + "Latent type: " + str(c, "layout");
    if (c.value("channels", 0) > 0) out += ", " + std::to_string(c.value("channels", 0)) + " channels";
    out += "\n";
    if (c.contains("spatial_ratio") && c["spatial_ratio"].is_number()) {
      out += in + "Spatial compression: " + num(c, "spatial_ratio", "%.1fx");
      if (c.contains("temporal_ratio") && c["temporal_ratio"].is_number()) {
        out += ", temporal compression: " + num(c, "temporal_ratio", "%.2fx");
      }
      out += "\n";
    }
  }
  if (c.contains("notes") && c["notes"].is_array()) {
    for (const json& n : c["notes"]) {
      if (n.is_string()) out += in + "note: " + n.get<std::string>() + "\n";
    }
  }
}

}  // namespace

void render_tensor_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                              const std::string& indent) {
  const json& d = a.data;
  const std::string in = indent + "   ";
  out += indent + s.mark("📐 ", "") + "TENSOR \"" + a.name + "\" (" + str(d, "role") + ")\n";
  const json stats = d.value("stats", json::object());
  out += in + "Shape: " + shape_text(d.value("shape", json::array())) + ", dtype " +
         str(d, "dtype") + ", device " + str(d, "device") + ", " +
         format_bytes(stats.value("bytes", 0.0)) + ", " +
         thousands(stats.value("numel", std::int64_t{0})) + " elements\n";
  render_family(out, d.value("classification", json()), in);
  out += in + "Stats: min " + num(stats, "min") + ", max " + num(stats, "max") + ", mean " +
         num(stats, "mean") + ", std " + num(stats, "std") + ", |max| " + num(stats, "abs_max") +
         "\n";
  out += in + "NaN " + thousands(stats.value("nan_count", std::int64_t{0})) + ", +Inf " +
         thousands(stats.value("pos_inf_count", std::int64_t{0})) + ", -Inf " +
         thousands(stats.value("neg_inf_count", std::int64_t{0})) + ", zeros " +
         thousands(stats.value("zero_count", std::int64_t{0}));
  if (stats.contains("hash") && stats["hash"].is_string()) {
    out += ", hash " + stats["hash"].get<std::string>();
  }
  out += "\n";
  if (d.contains("flags") && d["flags"].is_array()) {
    for (const json& f : d["flags"]) {
      out += in + s.mark("⚠️  ", "! ") + str(f, "name") + ": " + str(f, "message") + "\n";
    }
  }
  if (d.contains("checks") && d["checks"].is_array()) {
    for (const json& c : d["checks"]) {
      const bool passed = c.value("passed", false);
      out += in + (passed ? s.mark("✅ ", "[pass] ") : s.mark("❌ ", "[FAIL] ")) + str(c, "name") +
             ": " + str(c, "reason") + "\n";
    }
  }
  if (d.contains("dump") && d["dump"].is_object()) {
    out += in + "Dumped to " + str(d["dump"], "path") + "\n";
  } else if (d.contains("dump") && d["dump"].is_string()) {
    out += in + "Dumped to " + d["dump"].get<std::string>() + "\n";
  }
}

}  // namespace genscope::detail
