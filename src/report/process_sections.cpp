// Console sections of a watched program's process tree (genscope run / watch):
// "figure_parts" (a step's per-process peaks) and "process_tree" (each process's lifetime
// peak). Data layouts: docs/run.md ("Memory of the process tree").
#include <cmath>
#include <algorithm>
#include <cstdio>

#include "genscope/report.hpp"
#include "report/console_style.hpp"

namespace genscope::detail {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxRows = 12;  // the largest processes; the rest are counted

double number(const json& d, const char* key) {
  return d.contains(key) && d[key].is_number() ? d[key].get<double>() : NAN;
}

std::string text(const json& d, const char* key) {
  return d.contains(key) && d[key].is_string() ? d[key].get<std::string>() : std::string();
}

std::string pid_text(const json& p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "pid %-7.0f", number(p, "pid"));
  return buf;
}

std::string padded_bytes(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%10s", format_bytes(bytes).c_str());
  return buf;
}

// "exact", "sampled" or "rusage" (wait4's figure only), padded to one width.
std::string source_text(const std::string& source) {
  std::string out = source.empty() ? "sampled" : source;
  out.resize(std::max<std::size_t>(out.size(), 7), ' ');
  return out;
}

std::string cut(const std::string& command) {
  return command.size() > 70 ? command.substr(0, 67) + "..." : command;
}

}  // namespace

void render_figure_parts_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                                    const std::string& indent) {
  const json& d = a.data;
  const std::string metric = text(d, "metric");
  if (!d.contains("parts") || !d["parts"].is_array()) return;
  const json& parts = d["parts"];
  out += indent + s.mark("🧩 ", "") + metric_label(metric) + " per process (peak in this step):\n";
  std::size_t shown = 0;
  for (const json& p : parts) {
    if (!p.is_object()) continue;
    if (shown++ == kMaxRows) break;
    out += indent + "   " + pid_text(p) + padded_bytes(number(p, "peak")) + " " +
           source_text(text(p, "peak_source")) +
           (p.value("exited", false) ? " (exited)" : "");
    if (!text(p, "command").empty()) out += "  " + cut(text(p, "command"));
    out += "\n";
  }
  if (parts.size() > kMaxRows)
    out += indent + "   ... and " + std::to_string(parts.size() - kMaxRows) + " more processes\n";
}

void render_process_tree_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                                    const std::string& indent) {
  const json& d = a.data;
  const std::string in = indent + "   ";
  char root[64];
  std::snprintf(root, sizeof root, "root pid %.0f", number(d, "root_pid"));
  out += indent + s.mark("🌳 ", "") + "PROCESS TREE (" + root + ", " +
         (d.value("peak_resets", true) ? "VmHWM reset at step boundaries"
                                       : "VmHWM not reset: sampled step peaks") +
         ")\n";
  if (d.contains("cgroup") && d["cgroup"].is_object()) {
    const json& c = d["cgroup"];
    out += in + "peak RAM of the tree: " + format_bytes(number(c, "lifetime_peak_bytes")) +
           " (memory cgroup v" + std::to_string(static_cast<int>(number(c, "version"))) + ", " +
           text(c, "lifetime_peak_source") + ")\n";
  }
  out += in + "sum of the processes' lifetime peaks: " +
         format_bytes(number(d, "sum_of_lifetime_peaks_bytes")) +
         "; highest sampled tree RSS: " + format_bytes(number(d, "max_sampled_tree_rss_bytes")) +
         "\n";
  if (!d.contains("processes") || !d["processes"].is_array()) return;
  const json& processes = d["processes"];
  std::size_t shown = 0;
  for (const json& p : processes) {
    if (!p.is_object()) continue;
    if (shown++ == kMaxRows) break;
    out += in + pid_text(p) + "lifetime peak" + padded_bytes(number(p, "lifetime_peak_bytes")) +
           " " + source_text(text(p, "lifetime_peak_source")) +
           (p.value("exited", false) ? " (exited)" : "");
    if (p.contains("reset_refused")) out += " [VmHWM reset refused: " + text(p, "reset_refused") + "]";
    out += "  " + cut(text(p, "command")) + "\n";
  }
  if (processes.size() > kMaxRows)
    out += in + "... and " + std::to_string(processes.size() - kMaxRows) + " more processes\n";
}

}  // namespace genscope::detail
