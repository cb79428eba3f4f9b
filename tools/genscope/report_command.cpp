// `genscope report RUN.json... [--plain] [--series] [--verbose] [--html F] [--trace F] [--csv DIR]
// [--metrics F [--openmetrics]] [--pushgateway URL] [--otlp URL]`: re-renders saved runs (console
// report, or the exports asked for); --metrics writes one run's Prometheus exposition,
// --pushgateway pushes it, --otlp sends each run to an OpenTelemetry collector.
#include <iostream>

#include "command.hpp"
#include "export_options.hpp"
#include "genscope/error.hpp"
#include "genscope/metrics.hpp"
#include "genscope/otlp.hpp"
#include "genscope/report.hpp"
#include "genscope/run_json.hpp"
#include "metrics_options.hpp"
#include "merged_outputs.hpp"

namespace genscope::cli {

void register_report_command(CLI::App& app, CommandContext& context) {
  struct Options {
    std::vector<std::string> paths;
    bool plain = false;
    bool series = false;
    bool verbose = false;
    ExportOptions exports;
    std::string metrics;
    bool openmetrics = false;
    std::string pushgateway;
    std::string otlp;
    MergeCliOptions merge;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Render saved runs: the console report, or HTML / Chrome trace / CSV / Prometheus exports");
  cmd->add_option("run", options->paths,
                  "Run document(s) (run.json); several runs overlay in --html and --trace, "
                  "except the ranks of one distributed generation (or a merged document), which are merged")
      ->required();
  cmd->add_flag("--plain", options->plain, "ASCII markers instead of emoji");
  cmd->add_flag("--series", options->series, "Also summarise the sampled time series");
  cmd->add_flag("--verbose", options->verbose, "Add every attachment's full data and every metric");
  add_export_options(*cmd, options->exports);
  cmd->add_option("--metrics", options->metrics,
                  "Write the run's final figures as Prometheus text to FILE ('-' = stdout)");
  cmd->add_flag("--openmetrics", options->openmetrics,
                "With --metrics: OpenMetrics 1.0.0 instead of Prometheus text 0.0.4");
  cmd->add_option("--pushgateway", options->pushgateway,
                  "Push the run's final figures to this Prometheus Pushgateway "
                  "(e.g. http://127.0.0.1:9091)");
  add_otlp_option(cmd, options->otlp);
  add_merge_options(*cmd, options->merge);
  cmd->callback([options, &context] {
    const bool metrics = !options->metrics.empty() || !options->pushgateway.empty();
    if (metrics && options->paths.size() != 1) {
      throw Error("InvalidOption", "--metrics and --pushgateway take one run document");
    }
    if (!options->pushgateway.empty()) check_pushgateway_url(options->pushgateway);
    SavedRuns saved = read_saved_runs(options->paths);
    // --otlp: each run its own trace (a rank's carries its rank as resource attributes).
    const auto export_otlp = [&options](const std::vector<Run>& runs) {
      if (options->otlp.empty()) return;
      const OtlpOptions otlp = otlp_options(options->otlp);
      const std::string url = resolve_otlp_targets(otlp).traces_url;
      for (const Run& run : runs) {
        export_run_otlp(run, otlp);  // OtlpExportFailed after its retries
        std::cerr << "genscope report: run " << run.id << " exported to " << url << " (trace "
                  << otlp_trace_id_hex(run) << ")\n";
      }
    };
    if (wants_merge(saved)) {  // the ranks of one distributed generation (docs/distributed.md)
      if (metrics) throw Error("InvalidOption", "--metrics and --pushgateway take one run document, not merged ranks");
      const double margin = parse_straggler_margin(options->merge.straggler_margin);
      export_otlp(saved.runs);
      const MergedRun merged = merge_runs(std::move(saved.runs), {.straggler_margin = margin});
      if (options->exports.any() || !options->merge.trace_dir.empty()) {
        write_merged_exports(merged, options->exports, options->merge, std::cout);
      } else {
        std::cout << render_merged_summary(merged, options->plain);
      }
      context.exit_code = 0;
      return;
    }
    if (!options->merge.trace_dir.empty()) {
      throw Error("InvalidOption", "--trace-dir takes the runs of one distributed generation");
    }
    std::vector<Run> runs = std::move(saved.runs);
    if (!options->metrics.empty()) {
      const std::string text = render_metrics(
          runs.front(),
          options->openmetrics ? MetricsFormat::kOpenMetrics : MetricsFormat::kPrometheusText);
      if (options->metrics == "-") {
        std::cout << text;
      } else {
        write_file_atomic(options->metrics, text);
        std::cout << "metrics: " << options->metrics << " ("
                  << format_bytes(static_cast<double>(text.size())) << ")\n";
      }
    }
    if (!options->pushgateway.empty()) {
      push_run_metrics(runs.front(), options->pushgateway);
      std::cerr << "genscope report: metrics pushed to " << options->pushgateway << "\n";
    }
    export_otlp(runs);
    if (options->exports.any()) {
      write_exports(runs, options->exports, options->metrics == "-" ? std::cerr : std::cout);
    } else if (options->metrics.empty() && options->otlp.empty()) {
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
