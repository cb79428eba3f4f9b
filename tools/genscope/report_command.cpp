// `genscope report RUN.json [--plain] [--json]`: re-renders a saved run; --metrics writes its
// Prometheus exposition, --pushgateway pushes it.
#include <iostream>

#include "command.hpp"
#include "genscope/metrics.hpp"
#include "genscope/report.hpp"
#include "genscope/run_json.hpp"

namespace genscope::cli {

void register_report_command(CLI::App& app, CommandContext& context) {
  struct Options {
    std::string path;
    bool plain = false;
    bool series = false;
    std::string metrics;
    bool openmetrics = false;
    std::string pushgateway;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("report", "Render the console report of a saved run");
  cmd->add_option("run", options->path, "Run document (run.json)")->required();
  cmd->add_flag("--plain", options->plain, "ASCII markers instead of emoji");
  cmd->add_flag("--series", options->series, "Also summarise the sampled time series");
  cmd->add_option("--metrics", options->metrics,
                  "Write the run's final figures as Prometheus text to FILE ('-' = stdout, "
                  "instead of the report)");
  cmd->add_flag("--openmetrics", options->openmetrics,
                "With --metrics: OpenMetrics 1.0.0 instead of Prometheus text 0.0.4");
  cmd->add_option("--pushgateway", options->pushgateway,
                  "Push the run's final figures to this Prometheus Pushgateway "
                  "(e.g. http://127.0.0.1:9091)");
  cmd->callback([options, &context] {
    if (!options->pushgateway.empty()) check_pushgateway_url(options->pushgateway);
    const Run run = read_run_file(options->path);
    if (!options->metrics.empty()) {
      const std::string text = render_metrics(
          run, options->openmetrics ? MetricsFormat::kOpenMetrics : MetricsFormat::kPrometheusText);
      if (options->metrics == "-") {
        std::cout << text;
      } else {
        write_file_atomic(options->metrics, text);
      }
    }
    if (!options->pushgateway.empty()) {
      push_run_metrics(run, options->pushgateway);
      std::cerr << "genscope report: metrics pushed to " << options->pushgateway << "\n";
    }
    if (options->metrics == "-") {
      context.exit_code = 0;
      return;
    }
    std::cout << render_console(run, ConsoleOptions{options->plain, options->series});
    context.exit_code = 0;
  });
}

}  // namespace genscope::cli
