// --html / --trace / --csv: the exports of finished runs (docs/report.md).
#include "export_options.hpp"

#include <new>

#include "genscope/chrome_trace.hpp"
#include "genscope/error.hpp"
#include "genscope/csv_export.hpp"
#include "genscope/html_report.hpp"
#include "genscope/report.hpp"
#include "genscope/run_json.hpp"
#include "memory_reserve.hpp"

namespace genscope::cli {

void add_export_options(CLI::App& command, ExportOptions& options) {
  command.add_option("--html", options.html,
                     "Write a self-contained HTML report (charts inlined, works offline)");
  command.add_option("--trace", options.trace,
                     "Write a Chrome Trace Event JSON file (Perfetto UI, chrome://tracing)");
  command.add_option("--csv", options.csv, "Write steps.csv and series.csv into this folder");
}

void write_exports(std::span<const Run> runs, const ExportOptions& options, std::ostream& out) {
  // Each export on its own: one that cannot be written is named, the others are still written.
  std::string failures;
  bool out_of_memory = false;
  auto attempt = [&](const char* what, const std::string& path, auto&& write) {
    if (path.empty()) return;
    try {
      write();
    } catch (const std::bad_alloc&) {  // what it built is freed: the next export may fit
      out_of_memory = true;
      arm_memory_reserve();
      failures += std::string(failures.empty() ? "" : "; ") + what + " " + path +
                  ": [OutOfMemory] not enough memory to render it";
    } catch (const Error& e) {
      failures += std::string(failures.empty() ? "" : "; ") + what + " " + path + ": [" + e.name() +
                  "] " + e.what();
    } catch (const std::exception& e) {
      failures += std::string(failures.empty() ? "" : "; ") + what + " " + path + ": " + e.what();
    }
  };
  auto written = [&out](const char* what, const std::string& path, std::size_t bytes) {
    out << what << ": " << path << " (" << format_bytes(static_cast<double>(bytes)) << ")\n";
  };
  attempt("html report", options.html, [&] {
    const std::string html = render_html_report(runs);
    write_file_atomic(options.html, html);
    written("html report", options.html, html.size());
  });
  attempt("trace", options.trace, [&] {
    const std::string trace = render_chrome_trace(runs);
    write_file_atomic(options.trace, trace);
    written("trace", options.trace, trace.size());
  });
  attempt("csv", options.csv, [&] {
    write_csv_export(runs, options.csv);
    out << "csv: " << options.csv << "/steps.csv, " << options.csv << "/series.csv\n";
  });
  if (!failures.empty()) {
    throw Error(out_of_memory ? "OutOfMemory" : "WriteFailed", "not written: " + failures);
  }
}

}  // namespace genscope::cli
