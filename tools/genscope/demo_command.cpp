// `genscope demo`: runs the reference diffusion pipeline (integrations/libtorch) under a
// monitor, writes run.json, dumps and images to --out, and prints the console report.
#include <iostream>
#include <memory>

#include "command.hpp"
#include "export_options.hpp"
#include "genscope/error.hpp"
#include "genscope/monitor.hpp"
#include "genscope/reference_pipeline.hpp"
#include "genscope/report.hpp"
#include "genscope/run_json.hpp"
#include "metrics_options.hpp"
#include "run_document.hpp"

namespace genscope::cli {

void register_demo_command(CLI::App& app, CommandContext& context) {
  struct Args {
    DemoOptions options;
    std::string budget;
    std::string out = "genscope-demo";
    bool plain = false;
    bool verbose = false;
    bool json_fallback = false;
    bool no_monitor = false;
    bool record = false;
    std::string db;
    MetricsCliOptions metrics;
    ExportOptions exports;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("demo", kDemoDescription);
  cmd->add_option("--mode", args->options.mode, "t2i (UNet, Euler) or i2v (DiT, flow matching)")
      ->check(CLI::IsMember({"t2i", "i2v"}));
  cmd->add_option("--preset", args->options.preset, "tiny, small or large")
      ->check(CLI::IsMember({"tiny", "small", "large"}));
  cmd->add_option("--steps", args->options.steps, "sampling steps (default: the preset's)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--seed", args->options.seed, "noise seed");
  cmd->add_option("--prompt", args->options.prompt, "positive prompt");
  cmd->add_option("--negative", args->options.negative, "negative prompt");
  cmd->add_option("--guidance", args->options.guidance, "classifier-free guidance scale")
      ->check(CLI::Range(0.0, 50.0));
  cmd->add_option("--lora-strength", args->options.lora_strength, "LoRA strength (0 = off)")
      ->check(CLI::Range(-10.0, 10.0));
  cmd->add_option("--memory-budget", args->budget,
                  "device-memory budget for VAE encoding, e.g. 64M (direct encoding refuses "
                  "above it, showing the fallback chain)");
  cmd->add_option("--out", args->out, "output folder (run.json, images, dumps)");
  cmd->add_option("--device", args->options.device, "cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--threads", args->options.threads,
                  "intra-op threads (fixed for identical output)")
      ->check(CLI::Range(1, 256));
  cmd->add_flag("--plain", args->plain, "ASCII report markers instead of emoji");
  cmd->add_flag("--verbose", args->verbose, "add every attachment's full data to the report");
  cmd->add_flag("--json-fallback", args->json_fallback,
                "print the run document on stderr when no file can be written");
  cmd->add_flag("--no-monitor", args->no_monitor, "run without monitoring (for comparison)");
  cmd->add_flag("--record", args->record, "record the run in the history database");
  cmd->add_option("--db", args->db, "history database (default: $XDG_DATA_HOME/genscope/history.db)");
  add_metrics_options(cmd, args->metrics);
  add_export_options(*cmd, args->exports);
  cmd->callback([args, &context] {
    DemoOptions& o = args->options;
    o.out_dir = args->out;
    if (!args->budget.empty()) o.memory_budget_bytes = parse_memory_size(args->budget);
    validate_demo_options(o);  // fails before any work (e.g. unwritable --out)
    if (args->no_monitor && args->exports.any()) {
      throw Error("InvalidOption",
                  "--html, --trace and --csv need the monitor (drop --no-monitor)");
    }
    MonitorOptions mo;
    mo.enabled = !args->no_monitor;
    mo.record = args->record;
    mo.history_db = args->db;
    if (!args->no_monitor) configure_metrics(args->metrics, mo);
    Monitor monitor(mo);
    if (!args->no_monitor) attach_metrics_endpoint(args->metrics, monitor, "demo");
    const std::unique_ptr<OtlpExporter> otlp =
        args->no_monitor ? nullptr : make_otlp_exporter(args->metrics);
    add_reference_probes(monitor, o);
    DemoResult result = run_reference_pipeline(o, monitor);
    SavedRunDocument saved;
    if (!args->no_monitor) {
      export_otlp(otlp.get(), result.run);
      // Saved before the report is printed: a closed pipe (genscope demo | head) must not
      // lose the document. A failed write never suppresses the report.
      saved = save_run_document(result.run, o.out_dir / "run.json", args->json_fallback);
      std::cout << render_console(result.run, {.plain = args->plain, .verbose = args->verbose});
      report_metrics_push(args->metrics, result.run, "demo");
    }
    std::cout << "outputs: " << result.images.size() << " PNG file(s) in " << o.out_dir.string()
              << " (xxh3 " << result.output_hash << ")\n";
    if (!args->no_monitor) {
      std::cout.flush();
      context.exit_code = print_run_document_outcome(saved, std::cout, std::cerr);
    }
    write_exports(std::span<const Run>(&result.run, 1), args->exports, std::cout);
    if (!result.error.empty()) {
      std::cerr << "genscope demo: the pipeline failed: " << result.error << "\n";
      if (context.exit_code == 0) context.exit_code = 1;
    }
  });
}

}  // namespace genscope::cli
