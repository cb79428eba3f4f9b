// Shared by `genscope run` and `genscope watch`: the options both take, the monitor over a
// process tree, and what happens to every run a WatchSession finishes (process-tree summary,
// targets, run document, history, report). Nothing here changes the watched program's exit
// status: every failure is printed as a warning and the next output still goes out.
#pragma once

#include <CLI/CLI.hpp>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "export_options.hpp"
#include "genscope/monitor.hpp"
#include "genscope/otlp.hpp"
#include "genscope/process_tree.hpp"
#include "genscope/run.hpp"
#include "genscope/targets.hpp"
#include "genscope/watch.hpp"
#include "metrics_options.hpp"

namespace genscope::cli {

/// The options `run` and `watch` share.
struct WatchedRunOptions {
  std::string pipeline, model;
  std::vector<std::string> labels;  // k=v
  std::vector<std::string> rule_files;
  std::string recognizers = "comfyui,sdcpp,tqdm,a1111";
  std::string runs = "auto";  // auto | program | announced (WatchOptions::runs)
  bool no_peak_reset = false;
  double interval_ms = 10;
  double max_interval_ms = 500;
  std::string nvml_library;
  // Outputs.
  std::string report_file, out_dir, db, targets_file;
  std::vector<std::string> target_specs;
  bool record = false, quiet = false, plain = false, verbose = false, json_fallback = false;
  ExportOptions exports;       // --html / --trace / --csv, one set per run
  MetricsCliOptions metrics;   // --metrics-port / --metrics-bind / --pushgateway
};

/// Adds the shared options to a subcommand.
void add_watched_run_options(CLI::App& cmd, WatchedRunOptions& o);

/// What a watching command keeps while the program runs.
class WatchedRuns {
 public:
  /// Checks everything that can be checked before the program starts: rule files
  /// (InvalidRules), targets (InvalidTargets, ReadFailed), --out and --report writable
  /// (WriteFailed), labels (InvalidLabel), the Pushgateway URL (InvalidPushgatewayUrl).
  /// `default_pipeline` names runs without --pipeline; `command` ("run", "watch") prefixes
  /// what is printed.
  WatchedRuns(const WatchedRunOptions& options, std::string default_pipeline,
              std::string command);
  ~WatchedRuns();

  /// The monitor over `tree` (system memory, NVML scoped to the tree, no probe of genscope
  /// itself) and the session that feeds it; call once, after the tree exists.
  WatchSession& start_session(std::shared_ptr<ProcessTree> tree,
                              std::vector<std::string> extra_notes = {});
  WatchSession* session() noexcept { return session_.get(); }
  /// For runs finished from now on (the one the program's end closes): a note, and the
  /// `watch.exit` label replaced when `exit_label` is not empty (genscope watch cannot read
  /// a non-child's exit status).
  void set_ending(std::string note, std::string exit_label = {});
  /// Runs finished so far.
  int runs() const noexcept { return runs_; }
  /// Ends the session and the monitor (after WatchSession::program_exited()).
  void finish();

 private:
  void handle(Run&& run) noexcept;
  void emit(Run& run);

  WatchedRunOptions options_;
  std::string default_pipeline_;
  std::string command_;
  Targets targets_;
  bool has_targets_ = false;
  std::vector<std::string> extra_notes_;
  std::vector<std::string> ending_notes_;
  std::string ending_exit_label_;
  std::shared_ptr<ProcessTree> tree_;
  std::unique_ptr<Monitor> monitor_;
  std::unique_ptr<WatchSession> session_;
  std::ofstream report_;
  std::shared_ptr<MetricsEndpoint> metrics_endpoint_;
  std::unique_ptr<OtlpExporter> otlp_;  ///< --otlp: each finished run, as saved.
  int runs_ = 0;
};

}  // namespace genscope::cli
