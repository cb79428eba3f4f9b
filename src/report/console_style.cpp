// Metric labels, value formatting and status markers for the console report.
#include "report/console_style.hpp"

#include <cmath>
#include <cstdio>

#include "genscope/report.hpp"

namespace genscope::detail {

std::string ConsoleStyle::status(StepStatus s) const {
  switch (s) {
    case StepStatus::kOk: return mark("✅", "[ok]");
    case StepStatus::kFailed: return mark("❌", "[FAILED]");
    case StepStatus::kSkipped: return mark("⏭️", "[skipped]");
    case StepStatus::kRunning: return mark("⏳", "[running]");
  }
  return "?";
}

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string metric_label(const std::string& name) {
  static const std::pair<const char*, const char*> kFixed[] = {
      {"process.rss_bytes", "RAM (process RSS)"},
      {"system.used_bytes", "RAM (system used)"},
      {"system.available_bytes", "RAM (system available)"},
      {"system.used_percent", "RAM usage"},
      {"system.total_bytes", "RAM (system total)"},
      {"tree.rss_bytes", "RAM (process tree RSS)"},
      {"tree.processes", "processes in the tree"},
      {"cgroup.usage_bytes", "RAM (memory cgroup)"},
  };
  for (const auto& [key, label] : kFixed) {
    if (name == key) return label;
  }
  static const std::pair<const char*, const char*> kGpu[] = {
      {".process_used_bytes", "memory used by this process"},
      {".tree_used_bytes", "memory used by the process tree"},
      {".used_bytes", "memory used (whole device)"},
      {".free_bytes", "memory free"},
      {".reserved_bytes", "memory reserved"},
      {".total_bytes", "memory total"},
      {".memory_utilization_percent", "memory-controller utilisation"},
      {".utilization_percent", "utilisation"},
      {".temperature_celsius", "temperature"},
      {".power_watts", "power"},
      {".sm_clock_hertz", "SM clock"},
      {".memory_clock_hertz", "memory clock"},
  };
  if (name.rfind("gpu", 0) == 0) {
    const auto dot = name.find('.');
    for (const auto& [suffix, label] : kGpu) {
      if (ends_with(name, suffix)) return "GPU " + name.substr(3, dot - 3) + " " + label;
    }
  }
  if (name.rfind("alloc.", 0) == 0) {
    const auto last = name.rfind('.');
    const std::string device = name.substr(6, last - 6);
    if (ends_with(name, ".allocated_bytes")) return "GPU allocated (" + device + ")";
    if (ends_with(name, ".reserved_bytes")) return "GPU reserved (" + device + ")";
  }
  return name;
}

std::string format_value(double value, Unit unit, bool sign) {
  if (std::isnan(value)) return "n/a";
  char buf[48];
  const char* plus = (sign && value > 0) ? "+" : "";
  switch (unit) {
    case Unit::kBytes: return format_bytes(value, sign);
    case Unit::kPercent: std::snprintf(buf, sizeof buf, "%s%.1f%%", plus, value); break;
    case Unit::kWatts: std::snprintf(buf, sizeof buf, "%s%.1f W", plus, value); break;
    case Unit::kCelsius: std::snprintf(buf, sizeof buf, "%s%.0f °C", plus, value); break;
    case Unit::kHertz: std::snprintf(buf, sizeof buf, "%s%.0f MHz", plus, value / 1e6); break;
    case Unit::kCount: std::snprintf(buf, sizeof buf, "%s%g", plus, value); break;
  }
  return buf;
}

namespace {

std::string scalar_text(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v.get<double>());
    return buf;
  }
  return v.dump();
}

// Generic rendering of an attachment's JSON: scalars as "key: value", small objects nested
// two levels deep, long arrays and large maps summarised by their size.
void render_json_fields(std::string& out, const nlohmann::json& j, const std::string& indent,
                        int depth) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const nlohmann::json& v = it.value();
    if (v.is_object()) {
      if (depth >= 2 || v.size() > 12) {
        out += indent + it.key() + ": {" + std::to_string(v.size()) + " entries}\n";
        continue;
      }
      out += indent + it.key() + ":\n";
      render_json_fields(out, v, indent + "  ", depth + 1);
    } else if (v.is_array() && (v.size() > 8 || (!v.empty() && v[0].is_structured()))) {
      out += indent + it.key() + ": [" + std::to_string(v.size()) + " items]\n";
    } else {
      out += indent + it.key() + ": " + scalar_text(v) + "\n";
    }
  }
}

}  // namespace

void render_attachment(std::string& out, const Attachment& a, const ConsoleStyle& style,
                       const std::string& indent) {
  if (a.data.is_object()) {
    if (a.type == "tensor") return render_tensor_attachment(out, a, style, indent);
    if (a.type == "usage") return render_usage_attachment(out, a, style, indent);
    if (a.type == "performance") return render_performance_attachment(out, a, style, indent);
    if (a.type == "figure_parts") return render_figure_parts_attachment(out, a, style, indent);
    if (a.type == "process_tree") return render_process_tree_attachment(out, a, style, indent);
  }
  out += indent + style.mark("📎 ", "* ") + a.type + (a.name.empty() ? "" : " \"" + a.name + "\"") +
         "\n";
  if (a.data.is_object()) {
    render_json_fields(out, a.data, indent + "   ", 0);
  } else if (!a.data.is_null()) {
    out += indent + "   " + a.data.dump() + "\n";
  }
}

}  // namespace genscope::detail
