// render_merged_html() and render_merged_trace(): a merged distributed generation as one
// HTML page (the ranks side by side, then the ranks' runs overlaid) and as one Chrome trace
// (a process per rank on the merged clock). include/genscope/merge.hpp.
#include <algorithm>
#include <cstdio>

#include "genscope/chrome_trace.hpp"
#include "genscope/html_report.hpp"
#include "genscope/merge.hpp"
#include "genscope/report.hpp"
#include "report/export_util.hpp"
#include "report/html_parts.hpp"

namespace genscope {
namespace {

std::string esc(std::string_view text) {
  std::string out;
  detail::append_html(out, text);
  return out;
}

std::string ms(std::int64_t ns) { return esc(format_duration(static_cast<double>(ns))); }

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f %%", fraction * 100.0);
  return buf;
}

// The ranks side by side: a column per rank.
std::string ranks_section(const MergedRun& m) {
  std::string out = "<p>Group <b>" + esc(m.group.empty() ? "(unnamed)" : m.group) + "</b>" +
                    (m.group_source.empty() ? "" : " (" + esc(m.group_source) + ")") + ", " +
                    std::to_string(m.ranks.size()) + " of " + std::to_string(m.world_size) +
                    " ranks. Clocks: " + esc(m.alignment) +
                    ". In the sections below, run A is the lowest rank, B the next, and so on; the timeline "
                    "shows each rank at its start on the merged clock.</p>";
  out += "<div class=\"scroll\"><table class=\"ranks\"><tr><th></th>";
  for (std::size_t r = 0; r < m.ranks.size(); ++r) {
    out += "<th class=\"num\">rank " + std::to_string(m.ranks[r].rank) + " (" + detail::run_letter(r) + ")</th>";
  }
  out += "<th class=\"num\">min</th><th class=\"num\">median</th><th class=\"num\">max</th><th>slowest</th></tr>";
  const auto row = [&](const std::string& name, const auto& cell) {
    out += "<tr><td>" + name + "</td>";
    for (const MergedRank& r : m.ranks) out += "<td class=\"num\">" + cell(r) + "</td>";
    out += "<td></td><td></td><td></td><td></td></tr>";
  };
  row("host", [](const MergedRank& r) { return esc(r.host); });
  row("run", [](const MergedRank& r) { return esc(r.run_id.substr(0, 8)); });
  row("starts at", [](const MergedRank& r) { return "+" + ms(r.offset_ns); });
  row("clock shift", [](const MergedRank& r) { return ms(r.clock_shift_ns); });
  row("duration", [](const MergedRank& r) { return ms(r.duration_ns); });
  row("processes in the launcher's tree",
      [](const MergedRank& r) { return r.tree_processes > 0 ? std::to_string(r.tree_processes) : std::string("–"); });
  std::vector<std::string> figures;
  for (const MergedRank& r : m.ranks) {
    for (const auto& [name, peak] : r.peak_bytes) {
      if (std::find(figures.begin(), figures.end(), name) == figures.end()) figures.push_back(name);
    }
  }
  for (const std::string& f : figures) {
    row("peak " + esc(f), [&f](const MergedRank& r) {
      const auto it = r.peak_bytes.find(f);
      return it == r.peak_bytes.end() ? std::string("–") : esc(format_bytes(it->second));
    });
  }
  char margin[32];
  std::snprintf(margin, sizeof margin, "%.0f %%", m.straggler_margin * 100.0);
  out += "<tr><th colspan=\"" + std::to_string(m.ranks.size() + 5) +
         "\">Steps (straggler: the slowest rank exceeds the median by more than " + margin +
         ")</th></tr>";
  for (const StepSpread& s : m.steps) {
    out += "<tr><td>" + esc(s.path) + (s.occurrence > 0 ? " #" + std::to_string(s.occurrence + 1) : "") +
           " <span class=\"note\">" + esc(std::string(to_string(s.kind))) + "</span></td>";
    for (std::size_t r = 0; r < m.ranks.size(); ++r) {
      const std::int64_t d = s.duration_ns[r];
      const bool slowest = d >= 0 && m.ranks[r].rank == s.slowest_rank && s.duration_ns.size() > 1;
      out += std::string("<td class=\"num") + (slowest ? (s.straggler ? " straggler" : " slowest") : "") +
             "\">" + (d < 0 ? std::string("–") : ms(d)) + "</td>";
    }
    out += "<td class=\"num\">" + ms(s.min_ns) + "</td><td class=\"num\">" + ms(s.median_ns) +
           "</td><td class=\"num\">" + ms(s.max_ns) + "</td><td>rank " + std::to_string(s.slowest_rank) +
           " (" + percent(s.excess) + ")" + (s.straggler ? " <b class=\"fail\">straggler</b>" : "") +
           (s.barrier ? " <span class=\"note\">barrier: waits for the others</span>" : "") + "</td></tr>";
  }
  out += "</table></div>";
  return out;
}

}  // namespace

std::string render_merged_html(const MergedRun& m) {
  HtmlReportOptions options;
  options.title = "genscope report: distributed generation (" + std::to_string(m.ranks.size()) + " ranks)";
  if (!m.runs.empty() && !m.runs.front().pipeline.name.empty()) options.title += ", " + m.runs.front().pipeline.name;
  options.lead_sections.push_back({"ranks", "Ranks", ranks_section(m)});
  for (const MergedRank& r : m.ranks) options.run_offsets_ns.push_back(r.offset_ns);  // merged clock
  return render_html_report(m.runs, options);
}

std::string render_merged_trace(const MergedRun& m) {
  std::vector<Run> runs = m.runs;
  ChromeTraceOptions options;
  for (const MergedRank& r : m.ranks) options.run_offsets_ns.push_back(r.offset_ns);
  if (m.launcher) {
    runs.push_back(*m.launcher);
    std::int64_t origin = m.runs.front().start_unix_ns + m.ranks.front().clock_shift_ns - m.ranks.front().offset_ns;
    options.run_offsets_ns.push_back(m.launcher->start_unix_ns - origin);
  }
  return render_chrome_trace(runs, options);
}

}  // namespace genscope
