// genscope-demo: `genscope demo` (the reference LibTorch pipeline) as its own program, so that
// only it loads LibTorch. `genscope demo ARGS` replaces itself with `genscope-demo demo ARGS`.
#include <string>

#include "command.hpp"
#include "genscope/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{"genscope: monitor and validate generative diffusion pipelines", "genscope"};
  app.set_version_flag("--version", std::string("genscope ") + genscope::version());
  app.require_subcommand(1);
  genscope::cli::CommandContext context;
  genscope::cli::register_demo_command(app, context);
  return genscope::cli::parse_and_run(app, context, argc, argv);
}
