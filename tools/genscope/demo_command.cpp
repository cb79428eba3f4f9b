// `genscope demo`: runs the reference diffusion pipeline (integrations/torch) under a
// monitor, writes run.json, dumps and images to --out, and prints the console report.
#include <iostream>
#include <memory>

#include "command.hpp"
#include "genscope/error.hpp"
#include "genscope/monitor.hpp"
#include "genscope/reference_pipeline.hpp"
#include "genscope/report.hpp"
#include "genscope/run_json.hpp"
#include "metrics_options.hpp"

namespace genscope::cli {

void register_demo_command(CLI::App& app, CommandContext& context) {
  struct Args {
    DemoOptions options;
    std::string budget;
    std::string out = "genscope-demo";
    bool plain = false;
    bool no_monitor = false;
    bool record = false;
    std::string db;
    MetricsCliOptions metrics;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "demo",
      "Run the reference latent-diffusion pipeline (seeded random weights) under the monitor");
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
  cmd->add_flag("--no-monitor", args->no_monitor, "run without monitoring (for comparison)");
  cmd->add_flag("--record", args->record, "record the run in the history database");
  cmd->add_option("--db", args->db, "history database (default: $XDG_DATA_HOME/genscope/history.db)");
  add_metrics_options(cmd, args->metrics);
  cmd->callback([args, &context] {
    DemoOptions& o = args->options;
    o.out_dir = args->out;
    if (!args->budget.empty()) o.memory_budget_bytes = parse_memory_size(args->budget);
    validate_demo_options(o);  // fails before any work (e.g. unwritable --out)
    MonitorOptions mo;
    mo.enabled = !args->no_monitor;
    mo.record = args->record;
    mo.history_db = args->db;
    if (!args->no_monitor) configure_metrics(args->metrics, mo);
    Monitor monitor(mo);
    if (!args->no_monitor) attach_metrics_endpoint(args->metrics, monitor, "demo");
    add_reference_probes(monitor, o);
    DemoResult result = run_reference_pipeline(o, monitor);
    const std::filesystem::path run_path = o.out_dir / "run.json";
    if (!args->no_monitor) {
      write_run_file(result.run, run_path);
      ConsoleOptions co;
      co.plain = args->plain;
      std::cout << render_console(result.run, co);
      report_metrics_push(args->metrics, result.run, "demo");
    }
    std::cout << "outputs: " << result.images.size() << " PNG file(s) in " << o.out_dir.string()
              << " (xxh3 " << result.output_hash << ")\n";
    if (!args->no_monitor) std::cout << "run document: " << run_path.string() << "\n";
    if (!result.error.empty()) {
      std::cerr << "genscope demo: the pipeline failed: " << result.error << "\n";
      context.exit_code = 1;
    }
  });
}

}  // namespace genscope::cli
