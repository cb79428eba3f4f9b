// `genscope report RUN.json [--plain] [--series] [--verbose]`: re-renders a saved run.
#include <iostream>

#include "command.hpp"
#include "genscope/report.hpp"
#include "genscope/run_json.hpp"

namespace genscope::cli {

void register_report_command(CLI::App& app, CommandContext& context) {
  struct Options {
    std::string path;
    bool plain = false;
    bool series = false;
    bool verbose = false;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("report", "Render the console report of a saved run");
  cmd->add_option("run", options->path, "Run document (run.json)")->required();
  cmd->add_flag("--plain", options->plain, "ASCII markers instead of emoji");
  cmd->add_flag("--series", options->series, "Also summarise the sampled time series");
  cmd->add_flag("--verbose", options->verbose, "Add every attachment's full data and every metric");
  cmd->callback([options, &context] {
    const Run run = read_run_file(options->path);
    std::cout << render_console(run, {.plain = options->plain,
                                      .series = options->series,
                                      .verbose = options->verbose});
    context.exit_code = 0;
  });
}

}  // namespace genscope::cli
