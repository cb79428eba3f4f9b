// genscope: the command-line entry point. Each subcommand lives in its own file.
#include <string_view>

#include "command.hpp"
#include "genscope/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{"genscope: monitor and validate generative diffusion pipelines"};
  app.set_version_flag("--version", std::string("genscope ") + genscope::version());
  app.require_subcommand(1);
  genscope::cli::CommandContext context;
  genscope::cli::register_report_command(app, context);
  genscope::cli::register_probe_command(app, context);
  genscope::cli::register_tensor_command(app, context);
  genscope::cli::register_validate_command(app, context);
  genscope::cli::register_compare_command(app, context);
  genscope::cli::register_history_command(app, context);
  genscope::cli::register_model_command(app, context);
  genscope::cli::register_lora_command(app, context);
  genscope::cli::register_run_command(app, context);
  genscope::cli::register_watch_command(app, context);
  genscope::cli::register_comfyui_command(app, context);
#ifdef GENSCOPE_HAVE_TORCH
  // Listed here; run by the genscope-demo program (see demo_exec.cpp).
  if (argc > 1 && std::string_view(argv[1]) == "demo") return genscope::cli::exec_demo_program(argv);
  app.add_subcommand("demo", genscope::cli::kDemoDescription);
#endif
  // `genscope run [OPTIONS] -- CMD ...`: CMD and its arguments are not genscope's to parse.
  if (argc > 2 && std::string_view(argv[1]) == "run") {
    for (int i = 2; i < argc; ++i) {
      if (std::string_view(argv[i]) != "--") continue;
      context.program.assign(argv + i + 1, argv + argc);
      argc = i;
      break;
    }
  }
  return genscope::cli::parse_and_run(app, context, argc, argv);
}
