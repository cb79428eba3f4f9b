// genscope: the command-line entry point. Each subcommand lives in its own file.
#include <cstdio>
#include <iostream>
#include <string_view>

#include "command.hpp"
#include "genscope/error.hpp"
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
#ifdef GENSCOPE_HAVE_TORCH
  genscope::cli::register_demo_command(app, context);
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const genscope::Error& e) {
    std::cerr << "genscope: error [" << e.name() << "]: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "genscope: error: " << e.what() << "\n";
    return 2;
  }
  return context.exit_code;
}
