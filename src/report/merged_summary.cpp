// render_merged_summary(): the console view of a merged distributed generation
// (include/genscope/merge.hpp).
#include <cstdio>

#include "genscope/merge.hpp"
#include "genscope/report.hpp"

namespace genscope {
namespace {

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f %%", fraction * 100.0);
  return buf;
}

std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

}  // namespace

std::string render_merged_summary(const MergedRun& m, bool plain) {
  std::string out = "Distributed generation: " + std::to_string(m.ranks.size()) + " of " +
                    std::to_string(m.world_size) + " ranks, group " +
                    (m.group.empty() ? std::string("(unnamed)") : m.group) +
                    (m.group_source.empty() ? "" : " (" + m.group_source + ")") + "\n";
  out += "Clocks: " + m.alignment + "\n";
  if (m.launcher) {
    out += "Launcher: run " + m.launcher->id.substr(0, 8) + " on " + m.launcher->host.hostname + ", " +
           format_duration(static_cast<double>(m.launcher->duration_ns), plain) + "\n";
  }
  out += "Ranks:\n";
  for (const MergedRank& r : m.ranks) {
    out += "  rank " + std::to_string(r.rank) + " on " + r.host + ": starts +" +
           format_duration(static_cast<double>(r.offset_ns), plain) + ", lasts " +
           format_duration(static_cast<double>(r.duration_ns), plain);
    if (r.clock_shift_ns != 0)
      out += ", clock shifted " + format_duration(static_cast<double>(r.clock_shift_ns), plain);
    if (r.tree_processes > 0) {
      out += ", " + std::to_string(r.tree_processes) + " process(es) in the launcher's tree";
    }
    for (const char* name : {"process.rss_bytes", "launcher.tree_rss_bytes"}) {
      if (const auto it = r.peak_bytes.find(name); it != r.peak_bytes.end())
        out += ", peak " + std::string(name) + " " + format_bytes(it->second);
    }
    for (const auto& [name, peak] : r.peak_bytes) {
      if (name.rfind("gpu", 0) == 0 || name.rfind("alloc.", 0) == 0)
        out += ", peak " + name + " " + format_bytes(peak);
    }
    out += "\n";
  }
  char margin[32];
  std::snprintf(margin, sizeof margin, "%.0f %%", m.straggler_margin * 100.0);
  out += "Steps across ranks (straggler: slowest > median + " + std::string(margin) + "):\n";
  for (const StepSpread& s : m.steps) {
    std::string name = s.path + (s.occurrence > 0 ? " #" + std::to_string(s.occurrence + 1) : "");
    out += "  " + pad(name, 32) + " min " + format_duration(static_cast<double>(s.min_ns), plain) +
           ", median " + format_duration(static_cast<double>(s.median_ns), plain) + ", max " +
           format_duration(static_cast<double>(s.max_ns), plain) + " (rank " +
           std::to_string(s.slowest_rank) + ", " + percent(s.excess) + ")";
    int missing = 0;
    for (std::int64_t d : s.duration_ns) missing += d < 0 ? 1 : 0;
    if (missing > 0) out += ", missing on " + std::to_string(missing) + " rank(s)";
    if (s.barrier) out += ", barrier (waits for the others)";
    if (s.straggler) out += plain ? "  STRAGGLER rank " : "  🐢 straggler rank ";
    if (s.straggler) out += std::to_string(s.slowest_rank);
    out += "\n";
  }
  return out;
}

}  // namespace genscope
