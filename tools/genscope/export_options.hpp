// The export options shared by `report`, `demo` (and `run`): --html FILE, --trace FILE,
// --csv DIR. Each writes its file(s) atomically from finished Run values and prints one line.
#pragma once

#include <CLI/CLI.hpp>
#include <ostream>
#include <span>
#include <string>

#include "genscope/run.hpp"

namespace genscope::cli {

/// Where the exports go; empty: not asked for.
struct ExportOptions {
  std::string html;   ///< --html FILE: the self-contained HTML report.
  std::string trace;  ///< --trace FILE: Chrome Trace Event JSON (Perfetto, chrome://tracing).
  std::string csv;    ///< --csv DIR: DIR/steps.csv and DIR/series.csv.

  /// True when at least one export was asked for.
  bool any() const noexcept { return !html.empty() || !trace.empty() || !csv.empty(); }
};

/// Adds --html, --trace and --csv to a subcommand.
void add_export_options(CLI::App& command, ExportOptions& options);
/// Writes the exports asked for, each naming its path on `out`. Each is written on its own:
/// when one cannot be written the others still are, then genscope::Error("WriteFailed")
/// names every one that failed.
void write_exports(std::span<const Run> runs, const ExportOptions& options, std::ostream& out);

}  // namespace genscope::cli
