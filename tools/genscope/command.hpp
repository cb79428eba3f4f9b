// How subcommands plug into the genscope CLI: one file per subcommand, each defining a
// register_<name>_command() that adds its CLI11 subcommand and callback. Callbacks set
// `context.exit_code`; errors (genscope::Error) are caught and printed by main.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

namespace genscope::cli {

/// Shared state of one CLI invocation.
struct CommandContext {
  int exit_code = 0;  ///< The process exit code the command asks for.
  /// `genscope run [OPTIONS] [--] CMD ARGS`: CMD and everything after its first word, kept
  /// away from CLI11 (which would read CMD's own options and "--" as genscope's).
  std::vector<std::string> program;
};

/// For `genscope <subcommand> [OPTIONS] [--] CMD ARGS...` (run): moves CMD and everything
/// after its first word into `command` and cuts argc there, so that only genscope's options
/// reach CLI11 — a "--" or an option among CMD's arguments is CMD's (`run echo a -- b`). CMD
/// starts after "--" or at the first argument that is not one of the subcommand's options
/// (nor an option's value). Returns 2 (error printed) for an unknown option before CMD.
std::optional<int> split_off_command(CLI::App& app, const std::string& subcommand, int& argc,
                                     char** argv, std::vector<std::string>& command);

/// Parses argv with `app` and runs the chosen subcommand's callback: the process exit code
/// (CLI11's for usage errors, 2 with "genscope: error [Name]: ..." for genscope::Error, and
/// for std::bad_alloc as [OutOfMemory]). Arms the memory reserve (memory_reserve.hpp) first.
int parse_and_run(CLI::App& app, CommandContext& context, int argc, char** argv);

/// `genscope demo`'s one-line description (the subcommand lives in the genscope-demo program).
inline constexpr const char* kDemoDescription =
    "Run the reference latent-diffusion pipeline (seeded random weights) under the monitor";
/// Replaces this process with the genscope-demo program next to this one, else the one on the
/// PATH (LibTorch is loaded only there, so the other commands start in milliseconds). Returns
/// only on failure: 2, with the error [DemoNotFound] printed.
int exec_demo_program(char** argv);

void register_report_command(CLI::App& app, CommandContext& context);
void register_merge_command(CLI::App& app, CommandContext& context);
void register_probe_command(CLI::App& app, CommandContext& context);
/// `genscope compare A B`: per-step comparison of runs (files, history ids, label selectors).
void register_compare_command(CLI::App& app, CommandContext& context);
/// `genscope history list|show|add|export|prune|regressions`: the SQLite run history.
void register_history_command(CLI::App& app, CommandContext& context);
/// `genscope validate RUN.json --targets F`: performance targets, score, diagnostics.
void register_validate_command(CLI::App& app, CommandContext& context);
void register_tensor_command(CLI::App& app, CommandContext& context);
/// `genscope demo`: the reference pipeline (tools/genscope/demo_command.cpp; needs
/// genscope::libtorch, so it is registered only in the genscope-demo program).
void register_demo_command(CLI::App& app, CommandContext& context);
/// `genscope model diff A B [--json]` (tools/genscope/model_command.cpp).
void register_model_command(CLI::App& app, CommandContext& context);
/// `genscope lora inspect|apply` (tools/genscope/lora_command.cpp).
void register_lora_command(CLI::App& app, CommandContext& context);
/// `genscope run [OPTIONS] -- CMD [ARGS...]` (tools/genscope/run_command.cpp).
void register_run_command(CLI::App& app, CommandContext& context);
/// `genscope watch --pid PID [--log FILE]` (tools/genscope/watch_command.cpp).
void register_watch_command(CLI::App& app, CommandContext& context);
/// `genscope comfyui install|uninstall COMFYUI_DIR` (tools/genscope/comfyui_command.cpp).
void register_comfyui_command(CLI::App& app, CommandContext& context);

}  // namespace genscope::cli
