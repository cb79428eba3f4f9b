// The merged outputs of a distributed generation (see merged_outputs.hpp).
#include "merged_outputs.hpp"

#include <cmath>
#include <filesystem>

#include "genscope/chrome_trace.hpp"
#include "genscope/csv_export.hpp"
#include "genscope/error.hpp"
#include "genscope/report.hpp"
#include "genscope/run_json.hpp"

namespace genscope::cli {

void add_merge_options(CLI::App& command, MergeCliOptions& options) {
  command.add_option("--straggler-margin", options.straggler_margin,
                     "A step's slowest rank is a straggler above the ranks' median + PCT (default 10%)");
  command.add_option("--trace-dir", options.trace_dir,
                     "Write one Chrome trace per rank into DIR (rank<R>.trace.json, for Holistic Trace Analysis)");
}

double parse_straggler_margin(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '%' || t.back() == ' ')) t.pop_back();
  std::size_t used = 0;
  double v = NAN;
  try {
    v = std::stod(t, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (t.empty() || used != t.size() || !std::isfinite(v) || v < 0) {
    throw Error("InvalidOption", "--straggler-margin '" + text + "': expected a percentage >= 0, e.g. 10%");
  }
  return v / 100.0;
}

SavedRuns read_saved_runs(const std::vector<std::string>& paths) {
  SavedRuns out;
  for (const std::string& path : paths) {
    SavedDocument doc = read_saved_document(path);
    if (doc.run) {
      out.runs.push_back(std::move(*doc.run));
      continue;
    }
    out.had_merged = true;
    for (Run& r : doc.merged->runs) out.runs.push_back(std::move(r));
    if (doc.merged->launcher) out.runs.push_back(std::move(*doc.merged->launcher));
  }
  return out;
}

bool wants_merge(const SavedRuns& saved) {
  if (saved.had_merged) return true;
  if (saved.runs.size() < 2) return false;
  for (const Run& r : saved.runs) {
    if (!r.distributed) return false;
  }
  return true;
}

void write_merged_exports(const MergedRun& merged, const ExportOptions& exports,
                          const MergeCliOptions& options, std::ostream& out) {
  std::string failures;
  const auto attempt = [&](const char* what, const std::string& path, auto&& write) {
    if (path.empty()) return;
    try {
      write();
    } catch (const Error& e) {
      failures += std::string(failures.empty() ? "" : "; ") + what + " " + path + ": [" + e.name() + "] " + e.what();
    } catch (const std::exception& e) {
      failures += std::string(failures.empty() ? "" : "; ") + what + " " + path + ": " + e.what();
    }
  };
  const auto written = [&out](const char* what, const std::string& path, std::size_t bytes) {
    out << what << ": " << path << " (" << format_bytes(static_cast<double>(bytes)) << ")\n";
  };
  attempt("html report", exports.html, [&] {
    const std::string html = render_merged_html(merged);
    write_file_atomic(exports.html, html);
    written("html report", exports.html, html.size());
  });
  attempt("trace", exports.trace, [&] {
    const std::string trace = render_merged_trace(merged);
    write_file_atomic(exports.trace, trace);
    written("trace", exports.trace, trace.size());
  });
  attempt("csv", exports.csv, [&] {
    write_csv_export(merged.runs, exports.csv);
    out << "csv: " << exports.csv << "/steps.csv, " << exports.csv << "/series.csv\n";
  });
  attempt("rank traces", options.trace_dir, [&] {
    std::error_code ec;
    std::filesystem::create_directories(options.trace_dir, ec);
    if (ec) throw Error("WriteFailed", "cannot create " + options.trace_dir + ": " + ec.message());
    for (const Run& run : merged.runs) {
      const std::filesystem::path path = std::filesystem::path(options.trace_dir) /
                                         ("rank" + std::to_string(run.distributed->rank) + ".trace.json");
      const std::string trace = render_chrome_trace(run);
      write_file_atomic(path, trace);
      written("rank trace", path.string(), trace.size());
    }
  });
  if (!failures.empty()) throw Error("WriteFailed", "not written: " + failures);
}

}  // namespace genscope::cli
