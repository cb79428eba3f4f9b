// Console rendering of run-level attachments: seed 003's usage statistics block and seed 004's
// performance validation (score, targets, diagnostics, recommendations).
#include <cmath>
#include <cstdio>

#include "genscope/report.hpp"
#include "report/console_style.hpp"

namespace genscope::detail {
namespace {

using nlohmann::json;

double number(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : kNaN;
}

std::string text(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

std::string fixed(double v, const char* format) {
  if (std::isnan(v)) return "n/a";
  char buf[48];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace

void render_usage_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                             const std::string& indent) {
  const json& d = a.data;
  const std::string in = indent + "   ";
  out += indent + s.mark("📊 ", "") + "MODEL USAGE STATISTICS\n";
  out += in + "Initialization Time: " + fixed(number(d, "initialization_seconds"), "%.2f s") + "\n";
  out += in + "Total Generations: " + fixed(number(d, "generations"), "%.0f") + "\n";
  out += in + "Peak Memory Usage: " + format_bytes(number(d, "peak_memory_bytes")) + "\n";
  out += in + "Average Inference Time: " + fixed(number(d, "average_inference_seconds"), "%.2f s") +
         "\n";
  out += in + "Total Inference Time: " + fixed(number(d, "total_inference_seconds"), "%.2f s") + "\n";
  out += in + "Current Memory: " + format_bytes(number(d, "current_memory_bytes")) + "\n";
  out += in + "Device: " + text(d, "device") + "\n";
}

void render_performance_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                                   const std::string& indent) {
  const json& d = a.data;
  const std::string in = indent + "   ";
  const bool met = d.value("met", false);
  out += indent + s.mark("🎯 ", "") + "PERFORMANCE VALIDATION: " +
         (met ? s.mark("✅ target met", "target met") : s.mark("❌ target missed", "target MISSED")) +
         ", score " + fixed(number(d, "score"), "%.1f") + "/100";
  if (!text(d, "architecture").empty()) out += " (" + text(d, "architecture") + ")";
  out += "\n";
  if (d.contains("results") && d["results"].is_array()) {
    for (const json& r : d["results"]) {
      out += in + (r.value("met", false) ? s.mark("✅ ", "[met] ") : s.mark("❌ ", "[missed] ")) +
             text(r, "scope") + " " + text(r, "target") + ": score " +
             fixed(number(r, "score"), "%.1f");
      if (!text(r, "note").empty()) out += " (" + text(r, "note") + ")";
      out += "\n";
    }
  }
  if (d.contains("diagnostics") && d["diagnostics"].is_array()) {
    for (const json& g : d["diagnostics"]) {
      out += in + s.mark("🔎 ", "diagnostic: ") + text(g, "message") + "\n";
    }
  }
  if (d.contains("recommendations") && d["recommendations"].is_array()) {
    for (const json& r : d["recommendations"]) {
      out += in + s.mark("💡 ", "recommendation: ") + text(r, "text") + "\n";
    }
  }
}

}  // namespace genscope::detail
