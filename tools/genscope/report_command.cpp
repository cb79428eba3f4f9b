// `genscope report RUN.json... [--plain] [--series] [--verbose] [--html F] [--trace F] [--csv DIR]`:
// re-renders saved runs (console report, or the exports asked for).
#include <iostream>

#include "command.hpp"
#include "export_options.hpp"
#include "genscope/report.hpp"
#include "genscope/run_json.hpp"

namespace genscope::cli {

void register_report_command(CLI::App& app, CommandContext& context) {
  struct Options {
    std::vector<std::string> paths;
    bool plain = false;
    bool series = false;
    bool verbose = false;
    ExportOptions exports;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "report", "Render saved runs: the console report, or HTML / Chrome trace / CSV exports");
  cmd->add_option("run", options->paths,
                  "Run document(s) (run.json); several runs overlay in --html and --trace")
      ->required();
  cmd->add_flag("--plain", options->plain, "ASCII markers instead of emoji");
  cmd->add_flag("--series", options->series, "Also summarise the sampled time series");
  cmd->add_flag("--verbose", options->verbose, "Add every attachment's full data and every metric");
  add_export_options(*cmd, options->exports);
  cmd->callback([options, &context] {
    std::vector<Run> runs;
    for (const std::string& path : options->paths) runs.push_back(read_run_file(path));
    if (options->exports.any()) {
      write_exports(runs, options->exports, std::cout);
    } else {
      for (const Run& run : runs) {
        std::cout << render_console(run, {.plain = options->plain,
                                          .series = options->series,
                                          .verbose = options->verbose});
      }
    }
    context.exit_code = 0;
  });
}

}  // namespace genscope::cli
