// WatchSession: steps and runs of a program that genscope does not run in-process.
//
// `genscope run -- CMD` and `genscope watch --pid` see a pipeline only from the outside: what
// it prints (ComfyUI, stable-diffusion.cpp, tqdm bars, A1111/Forge, user rule files) and what
// it writes on its event channel (JSON lines on the descriptor named by GENSCOPE_EVENTS_FD,
// including the steps an in-process genscope Monitor forwards). A WatchSession turns both into
// steps of runs on a Monitor whose probes watch the program's process tree. See docs/run.md.
//
// Example:
//   genscope::Monitor monitor(options);               // + the process-tree probe of CMD
//   genscope::WatchSession session(monitor, {.on_run_finished = [](genscope::Run&& r) { ... }});
//   session.output(2, bytes_read_from_stderr, genscope::Step::now_ns());
//   session.event_line(R"({"event":"begin","kind":"sampling","name":"denoise"})", now);
//   session.program_exited(wait_status, genscope::Step::now_ns());
//
// Changes since the interface was first committed (5f3c3be), same shape:
//   - WatchOptions::runs (RunScope): which runs are recorded; kAuto by default.
//   - WatchSession::start(steady_ns): the program started (opens the program run).
//   - the constructor also throws Error("UnknownRecognizer") for an unknown built-in name.
//   - WatchStats: cut_lines, steps_outside_runs, callback_errors.
//   - program_exited() reads unended lines first and ignores later output()/event_line().
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "genscope/monitor.hpp"
#include "genscope/run.hpp"

namespace genscope {

/// Which runs a WatchSession records (docs/run.md, "Runs").
enum class RunScope {
  /// One run for the whole program, until the program announces runs (a ComfyUI prompt, an
  /// event-channel `run_begin`, a forwarded in-process run): then what came before is
  /// finished as a run labelled `watch.run=startup` and each announced run is a run.
  kAuto,
  /// One run for the whole program; announced runs become custom steps.
  kProgram,
  /// Only announced runs (`genscope watch --pid` of a server): nothing outside them.
  kAnnounced,
};

/// How a WatchSession reads a program.
struct WatchOptions {
  /// Pipeline name, labels, ... of every run the session starts.
  RunOptions run;
  /// Which runs are recorded.
  RunScope runs = RunScope::kAuto;
  /// Built-in recognisers to use, by name: "comfyui", "sdcpp", "tqdm", "a1111". Empty = none.
  /// They read each line in the order comfyui, sdcpp, a1111, tqdm (the first that recognises
  /// a line claims it). An unknown name throws genscope::Error("UnknownRecognizer").
  std::vector<std::string> recognizers{"comfyui", "sdcpp", "tqdm", "a1111"};
  /// User rule files (JSON, docs/run.md "Rule files"), loaded by the constructor: a bad file
  /// throws genscope::Error("InvalidRules") naming the file and the rule, before anything runs.
  std::vector<std::filesystem::path> rule_files;
  /// Called with each finished run (one per prompt for a server that announces prompts,
  /// else one for the whole program). Exceptions from it are caught and counted.
  std::function<void(Run&&)> on_run_finished;
};

/// What a session has seen so far.
struct WatchStats {
  std::uint64_t output_bytes = 0;       ///< Bytes passed to output().
  std::uint64_t lines = 0;              ///< Lines split from the output.
  std::uint64_t recognized_lines = 0;   ///< Lines that produced at least one event.
  std::uint64_t event_lines = 0;        ///< Event-channel lines received.
  std::uint64_t malformed_event_lines = 0;  ///< Event-channel lines that were not valid events.
  std::uint64_t runs_finished = 0;
  std::uint64_t cut_lines = 0;             ///< Lines longer than the bound (cut for matching).
  std::uint64_t steps_outside_runs = 0;    ///< Steps dropped because no run was recorded.
  std::uint64_t callback_errors = 0;       ///< Exceptions thrown by on_run_finished.
};

/// Turns a watched program's output and event channel into runs on `monitor`.
/// Not thread-safe: call it from one thread. Never throws from output()/event_line()
/// (failures are monitoring errors of the current run).
class WatchSession {
 public:
  /// Loads the rule files (InvalidRules on error); starts no run yet.
  WatchSession(Monitor& monitor, WatchOptions options);
  /// The program started (call it right after starting it): opens the whole-program run
  /// unless the scope is kAnnounced. Without it, the first output()/event_line() does.
  void start(std::int64_t steady_ns) noexcept;
  ~WatchSession();
  WatchSession(const WatchSession&) = delete;
  WatchSession& operator=(const WatchSession&) = delete;

  /// Bytes the program wrote on stream 1 (stdout) or 2 (stderr), exactly as they came; lines
  /// are split on '\n' and '\r' (progress-bar frames), overlong lines are cut and counted.
  void output(int stream, std::string_view bytes, std::int64_t steady_ns) noexcept;
  /// One line of the event channel (without its '\n').
  void event_line(std::string_view line, std::int64_t steady_ns) noexcept;
  /// The program ended with `wait_status` (as from waitpid): reads what is left of unended
  /// lines, closes open steps (failed when the program failed) and finishes the current run.
  /// Later calls of output()/event_line() are ignored.
  void program_exited(int wait_status, std::int64_t steady_ns) noexcept;
  /// The run in progress, if any (e.g. for a periodic report); nullptr between prompts.
  ActiveRun* current_run() noexcept;
  /// Counts of what was read.
  WatchStats stats() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace genscope
