// --html / --trace / --csv: the exports of finished runs (docs/report.md).
#include "export_options.hpp"

#include "genscope/chrome_trace.hpp"
#include "genscope/csv_export.hpp"
#include "genscope/html_report.hpp"
#include "genscope/report.hpp"
#include "genscope/run_json.hpp"

namespace genscope::cli {

void add_export_options(CLI::App& command, ExportOptions& options) {
  command.add_option("--html", options.html,
                     "Write a self-contained HTML report (charts inlined, works offline)");
  command.add_option("--trace", options.trace,
                     "Write a Chrome Trace Event JSON file (Perfetto UI, chrome://tracing)");
  command.add_option("--csv", options.csv, "Write steps.csv and series.csv into this folder");
}

void write_exports(std::span<const Run> runs, const ExportOptions& options, std::ostream& out) {
  auto written = [&out](const char* what, const std::string& path, std::size_t bytes) {
    out << what << ": " << path << " (" << format_bytes(static_cast<double>(bytes)) << ")\n";
  };
  if (!options.html.empty()) {
    const std::string html = render_html_report(runs);
    write_file_atomic(options.html, html);
    written("html report", options.html, html.size());
  }
  if (!options.trace.empty()) {
    const std::string trace = render_chrome_trace(runs);
    write_file_atomic(options.trace, trace);
    written("trace", options.trace, trace.size());
  }
  if (!options.csv.empty()) {
    write_csv_export(runs, options.csv);
    out << "csv: " << options.csv << "/steps.csv, " << options.csv << "/series.csv\n";
  }
}

}  // namespace genscope::cli
