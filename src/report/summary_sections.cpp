// Console rendering of run-level attachments: seed 003's usage statistics block (the monitor's
// "usage" across runs, a pipeline's "usage_statistics" for one run) and seed 004's
// performance validation (score, targets, diagnostics, recommendations).
#include <cctype>
#include <cmath>
#include <cstdio>

#include "report/console_style.hpp"
#include "report/json_fields.hpp"
#include "report/memory_section.hpp"

namespace genscope::detail {
namespace {

using nlohmann::json;

std::string seconds(const json& d, const char* key, const ConsoleStyle& s) {
  return s.duration(field_number(d, key) * 1e9);
}

std::string nanoseconds(const json& d, const char* key, const ConsoleStyle& s) {
  return s.duration(field_number(d, key));
}

std::string fixed(double v, const char* format) {
  if (std::isnan(v)) return "n/a";
  char buf[48];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// "RAM (process RSS) 306 MiB, GPU 0 memory used 2.10 GiB" from {metric name: bytes}; totals
// and free/available figures are left out (they are not usage).
std::string memory_list(const json& figures) {
  std::string t;
  if (!figures.is_object()) return t;
  for (const auto& [name, v] : figures.items()) {
    if (!v.is_number() || !name.ends_with("_bytes") || is_constant_metric(name) ||
        is_headroom_metric(name)) {
      continue;
    }
    t += (t.empty() ? "" : ", ") + metric_label(name) + " " + format_bytes(v.get<double>());
  }
  return t.empty() ? "n/a" : t;
}

}  // namespace

void render_usage_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                             const std::string& indent) {
  const json& d = a.data;
  const std::string in = indent + "   ";
  out += indent + s.mark("📊 ", "") + "MODEL USAGE STATISTICS (every run of this monitor so far)\n";
  out += in + "Initialization Time: " + seconds(d, "initialization_seconds", s) + "\n";
  out += in + "Total Generations: " + format_count(field_number(d, "generations")) + "\n";
  out += in + "Peak Memory Usage: " + format_bytes(field_number(d, "peak_memory_bytes")) + "\n";
  out += in + "Average Inference Time: " + seconds(d, "average_inference_seconds", s) + "\n";
  out += in + "Total Inference Time: " + seconds(d, "total_inference_seconds", s) + "\n";
  out += in + "Current Memory: " + format_bytes(field_number(d, "current_memory_bytes")) + "\n";
  out += in + "Device: " + field_text(d, "device") + "\n";
}

void render_usage_statistics_attachment(std::string& out, const Attachment& a,
                                        const ConsoleStyle& s, const std::string& indent) {
  const json& d = a.data;
  const std::string in = indent + "   ";
  std::string kind = field_text(d, "output_kind");
  if (!kind.empty()) kind[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(kind[0])));
  out += indent + s.mark("📊 ", "") + "MODEL USAGE STATISTICS (this run)\n";
  out += in + "Initialization Time: " + nanoseconds(d, "initialization_time_ns", s) + "\n";
  out += in + "Total " + (kind.empty() ? std::string("Outputs") : kind + "s") +
         " Generated: " + format_count(field_number(d, "total_generated")) + "\n";
  out += in + "Peak Memory Usage: " + memory_list(d.value("peak_memory", json())) + "\n";
  out += in + "Average Inference Time: " + nanoseconds(d, "average_inference_time_ns", s) + "\n";
  out += in + "Total Inference Time: " + nanoseconds(d, "total_inference_time_ns", s) + "\n";
  if (!std::isnan(field_number(d, "wall_ns"))) {
    out += in + "Wall Time: " + nanoseconds(d, "wall_ns", s) + "\n";
  }
  if (const json* loads = field(d, "memory_after_component_load");
      loads != nullptr && loads->is_array() && !loads->empty()) {
    out += in + "Memory after each component load:\n";
    for (const json& l : *loads) {
      out += in + "   " + field_text(l, "stage") + ": " + memory_list(l.value("memory", json())) +
             "\n";
    }
  }
  out += in + "Device: " + field_text(d, "device_name") + "\n";
}

void render_performance_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                                   const std::string& indent) {
  const json& d = a.data;
  const std::string in = indent + "   ";
  const bool met = field_bool(d, "met");
  out += indent + s.mark("🎯 ", "") + "PERFORMANCE VALIDATION: " +
         (met ? s.mark("✅ target met", "target met") : s.mark("❌ target missed", "target MISSED")) +
         ", score " + fixed(field_number(d, "score"), "%.1f") + "/100";
  if (!field_text(d, "architecture").empty()) out += " (" + field_text(d, "architecture") + ")";
  out += "\n";
  if (const json* results = field(d, "results"); results != nullptr && results->is_array()) {
    for (const json& r : *results) {
      out += in + (field_bool(r, "met") ? s.mark("✅ ", "[met] ") : s.mark("❌ ", "[missed] ")) +
             field_text(r, "scope") + " " + field_text(r, "target") + ": score " +
             fixed(field_number(r, "score"), "%.1f");
      if (!field_text(r, "note").empty()) out += " (" + field_text(r, "note") + ")";
      out += "\n";
    }
  }
  if (const json* diagnostics = field(d, "diagnostics");
      diagnostics != nullptr && diagnostics->is_array()) {
    for (const json& g : *diagnostics) {
      out += in + s.mark("🔎 ", "diagnostic: ") + field_text(g, "message") + "\n";
    }
  }
  if (const json* recs = field(d, "recommendations"); recs != nullptr && recs->is_array()) {
    for (const json& r : *recs) {
      out += in + s.mark("💡 ", "recommendation: ") + field_text(r, "text") + "\n";
    }
  }
}

}  // namespace genscope::detail
