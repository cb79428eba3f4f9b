// genscope: the command-line entry point. Each subcommand lives in its own file.
#include <fcntl.h>

#include <cerrno>
#include <string_view>

#include "command.hpp"
#include "genscope/version.hpp"

namespace {

// Started with stdin, stdout or stderr closed (cron, daemons): the first files genscope opens
// would take those numbers, and then what it (or a library) writes to "stderr" would land in
// a run document, a history database or CMD's pipe. Each closed one gets a placeholder that
// is not inherited (CMD sees it closed, as without genscope) and that cannot be written, so
// writes to it still fail with EBADF as they would have.
void hold_closed_standard_streams() noexcept {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
    const int placeholder = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // the lowest free: fd
    if (placeholder >= 0 && placeholder != fd) ::close(placeholder);
  }
}

}  // namespace

int main(int argc, char** argv) {
  hold_closed_standard_streams();
  CLI::App app{"genscope: monitor and validate generative diffusion pipelines"};
  app.set_version_flag("--version", std::string("genscope ") + genscope::version());
  app.require_subcommand(1);
  genscope::cli::CommandContext context;
  genscope::cli::register_report_command(app, context);
  genscope::cli::register_merge_command(app, context);
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
  // Listed here; run by the genscope-demo program, found beside this one or on the PATH (a
  // genscope built without LibTorch, a pip wheel's, has none beside it; demo_exec.cpp).
  if (argc > 1 && std::string_view(argv[1]) == "demo") return genscope::cli::exec_demo_program(argv);
  app.add_subcommand("demo", genscope::cli::kDemoDescription);
  // `genscope run [OPTIONS] [--] CMD ARGS...`: CMD and its arguments are not genscope's to parse.
  if (const auto failed = genscope::cli::split_off_command(app, "run", argc, argv, context.program))
    return *failed;
  return genscope::cli::parse_and_run(app, context, argc, argv);
}
