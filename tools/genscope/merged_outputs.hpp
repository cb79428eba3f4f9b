// Shared by `merge`, `report` and `run`: the runs of one distributed generation read from
// saved documents and merged, and the merged outputs (document, console summary, HTML,
// trace, one trace per rank for Holistic Trace Analysis). docs/distributed.md.
#pragma once

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "export_options.hpp"
#include "genscope/merge.hpp"

namespace genscope::cli {

/// The options of merged outputs besides --html/--trace/--csv.
struct MergeCliOptions {
  std::string straggler_margin = "10%";  ///< --straggler-margin PCT
  std::string trace_dir;                 ///< --trace-dir DIR: rank<R>.trace.json per rank
};

/// Adds --straggler-margin and --trace-dir to a subcommand.
void add_merge_options(CLI::App& command, MergeCliOptions& options);
/// The margin as a fraction: "10", "10%" and "10 %" are 0.10. Throws
/// genscope::Error("InvalidOption") for anything else or a negative value.
double parse_straggler_margin(const std::string& text);

/// What the documents at `paths` hold: every run (merged documents contribute their ranks'
/// runs and launcher), and whether one of them was a merged document.
struct SavedRuns {
  std::vector<Run> runs;
  bool had_merged = false;
};
SavedRuns read_saved_runs(const std::vector<std::string>& paths);

/// True when the runs should be merged rather than overlaid: a merged document was given, or
/// several runs all of a distributed job.
bool wants_merge(const SavedRuns& saved);

/// Writes the merged exports asked for (--html: ranks side by side; --trace: a process per
/// rank; --csv: the ranks' steps; --trace-dir: one trace per rank), each naming its path on
/// `out`; genscope::Error("WriteFailed") names those that could not be written.
void write_merged_exports(const MergedRun& merged, const ExportOptions& exports,
                          const MergeCliOptions& options, std::ostream& out);

}  // namespace genscope::cli
