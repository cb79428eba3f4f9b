// `genscope merge RUN... [-o merged.json] [--straggler-margin PCT] [--html F] [--trace F]
// [--csv DIR] [--trace-dir DIR] [--plain]`: joins the runs of one distributed generation
// (one per rank, and the launcher's) into one merged document, prints the ranks and the
// per-step spread across them (stragglers marked). docs/distributed.md.
#include <iostream>

#include "command.hpp"
#include "genscope/error.hpp"
#include "genscope/merge.hpp"
#include "genscope/run_json.hpp"
#include "merged_outputs.hpp"

namespace genscope::cli {

void register_merge_command(CLI::App& app, CommandContext& context) {
  struct Options {
    std::vector<std::string> paths;
    std::string output;
    bool plain = false;
    ExportOptions exports;
    MergeCliOptions merge;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "merge", "Join the rank runs of one distributed generation: clocks aligned, per-step spread, stragglers");
  cmd->add_option("run", o->paths, "Run documents of the ranks (and the launcher), or merged documents")
      ->required();
  cmd->add_option("-o,--output", o->output, "Write the merged document (genscope.merged/1) to FILE");
  cmd->add_flag("--plain", o->plain, "ASCII markers instead of emoji");
  add_export_options(*cmd, o->exports);
  add_merge_options(*cmd, o->merge);
  cmd->callback([o, &context] {
    const double margin = parse_straggler_margin(o->merge.straggler_margin);
    SavedRuns saved = read_saved_runs(o->paths);
    const MergedRun merged = merge_runs(std::move(saved.runs), {.straggler_margin = margin});
    std::cout << render_merged_summary(merged, o->plain);
    if (!o->output.empty()) {
      const std::string text = to_json(merged).dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
      write_file_atomic(o->output, text);
      std::cout << "merged document: " << o->output << "\n";
    }
    write_merged_exports(merged, o->exports, o->merge, std::cout);
    context.exit_code = 0;
  });
}

}  // namespace genscope::cli
