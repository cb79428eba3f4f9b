// WatchedRuns: the monitor, session and run outputs shared by `genscope run` and `watch`.
#include "watched_runs.hpp"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "genscope/error.hpp"
#include "genscope/history.hpp"
#include "genscope/journal.hpp"
#include "genscope/report.hpp"
#include "genscope/run_json.hpp"
#include "genscope/validation.hpp"
#include "run_document.hpp"
#include "run_selection.hpp"

namespace genscope::cli {
namespace {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty() && item != "none") out.push_back(item);
  }
  return out;
}

void warn(const std::string& what) noexcept {
  try {
    std::cerr << "genscope: warning: " << what << "\n";
  } catch (...) {
  }
}

// The n-th run's file: the path itself for the first run, "-n" added to the name before its
// extension for later ones (report.html, report-2.html; for --csv the folder: csv, csv-2).
std::string nth_path(const std::string& path, int n) {
  if (path.empty() || n <= 1) return path;
  const std::filesystem::path p(path);
  return (p.parent_path() / (p.stem().string() + "-" + std::to_string(n) + p.extension().string()))
      .string();
}

// The peaks for the one-line summary: the processes' lifetime RSS peak (one process: its
// own; several: the sum of theirs, an upper bound of the tree's) and the memory cgroup's
// exact peak when there is one.
std::string peak_text(const Run& run) {
  for (const Attachment& a : run.attachments) {
    if (a.type != "process_tree" || !a.data.is_object()) continue;
    const auto& d = a.data;
    std::string text;
    if (d["processes"].is_array() && d["processes"].empty()) {
      text = "RSS peak unknown (no process lived long enough to be sampled)";
    } else if (d["sum_of_lifetime_peaks_bytes"].is_number() && d["processes"].is_array()) {
      const std::size_t n = d["processes"].size();
      std::string source = "sampled";
      if (n == 1 && d["processes"][0]["lifetime_peak_source"].is_string())
        source = d["processes"][0]["lifetime_peak_source"].get<std::string>();
      text = "RSS peak " + format_bytes(d["sum_of_lifetime_peaks_bytes"].get<double>()) +
             (n == 1 ? " (" + source + ")" : " (sum of " + std::to_string(n) + " processes' peaks)");
    }
    if (d.contains("cgroup") && d["cgroup"]["lifetime_peak_bytes"].is_number()) {
      text += (text.empty() ? "" : ", ") + std::string("cgroup peak ") +
              format_bytes(d["cgroup"]["lifetime_peak_bytes"].get<double>()) + " (" +
              d["cgroup"]["lifetime_peak_source"].get<std::string>() + ")";
    }
    if (!text.empty()) return text;
  }
  return "peak RAM unknown";
}

}  // namespace

void add_watched_run_options(CLI::App& cmd, WatchedRunOptions& o) {
  cmd.add_option("--pipeline", o.pipeline, "Pipeline name of the runs (default: the program's name)");
  cmd.add_option("--model", o.model, "Model name recorded with the runs");
  // One value per occurrence: the program and its arguments follow.
  cmd.add_option("--label", o.labels, "Run label k=v (repeatable)")->allow_extra_args(false);
  cmd.add_option("--rules", o.rule_files, "Rule file (JSON, docs/run.md; repeatable)")
      ->allow_extra_args(false);
  cmd.add_option("--recognizers", o.recognizers,
                 "Built-in recognisers, comma-separated, or none (default: comfyui,sdcpp,tqdm,a1111)");
  cmd.add_option("--runs", o.runs,
                 "Which runs are recorded: auto (the program, split at announced runs such as "
                 "ComfyUI prompts), program (one run), announced (only announced runs)")
      ->check(CLI::IsMember({"auto", "program", "announced"}))
      ->capture_default_str();
  cmd.add_flag("--no-peak-reset", o.no_peak_reset,
               "Leave each process's VmHWM alone (what getrusage/time -v report): sampled peaks");
  cmd.add_option("--interval", o.interval_ms,
                 "Sampling interval in ms near step boundaries and changes (default 10, >= 1)")
      ->check(CLI::Range(1.0, 10000.0));
  cmd.add_option("--max-interval", o.max_interval_ms,
                 "Longest sampling interval in ms while nothing happens (default 500; equal to "
                 "--interval for a fixed cadence). Step peaks are exact at any cadence")
      ->check(CLI::Range(1.0, 60000.0));
  cmd.add_option("--nvml-library", o.nvml_library, "NVML library path (else GENSCOPE_NVML_LIBRARY)");
  cmd.add_option("--report", o.report_file,
                 "Write the console report(s) (or --quiet lines) to FILE instead of stderr");
  cmd.add_option("--out", o.out_dir, "Write each run document to DIR (run.json; run-2.json, ... for more runs)");
  cmd.add_flag("--record", o.record, "Record each run in the history database as it finishes");
  cmd.add_option("--db", o.db, "History database for --record");
  cmd.add_option("--targets", o.targets_file, "Targets file (JSON); each run gets its performance report");
  cmd.add_option("--target", o.target_specs, "Target spec, e.g. sampling.min_it_per_s=4 (repeatable)")
      ->allow_extra_args(false);
  cmd.add_flag("--quiet", o.quiet, "Print only a one-line summary per run");
  cmd.add_flag("--plain", o.plain, "ASCII report markers instead of emoji");
  cmd.add_flag("--verbose", o.verbose, "Add every attachment's full data to the report");
  cmd.add_flag("--json-fallback", o.json_fallback,
               "Print a run document on stderr when no file can be written for it");
  add_export_options(cmd, o.exports);
  add_metrics_options(&cmd, o.metrics);
}

WatchedRuns::WatchedRuns(const WatchedRunOptions& options, std::string default_pipeline,
                         std::string command)
    : options_(options), default_pipeline_(std::move(default_pipeline)), command_(std::move(command)) {
  parse_labels(options_.labels);  // InvalidLabel now rather than after the program ran
  {
    MonitorOptions check;
    configure_metrics(options_.metrics, check);  // InvalidPushgatewayUrl before the program starts
  }
  {
    // The rule files are loaded by the session's constructor: one on a disabled monitor
    // checks them before anything starts.
    MonitorOptions off;
    off.enabled = false;
    off.process_probe = off.system_probe = off.nvml_probe = false;
    Monitor disabled(off);
    WatchOptions check;
    check.recognizers = split_list(options_.recognizers);
    for (const std::string& f : options_.rule_files) check.rule_files.emplace_back(f);
    WatchSession probe(disabled, check);
  }
  const std::string pipeline = options_.pipeline.empty() ? default_pipeline_ : options_.pipeline;
  if (!options_.targets_file.empty()) {
    targets_ = read_targets_file(options_.targets_file, pipeline);
    has_targets_ = true;
  }
  for (const std::string& spec : options_.target_specs) {
    apply_target_spec(targets_, spec);
    has_targets_ = true;
  }
  if (!options_.out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options_.out_dir, ec);
    if (ec || !std::filesystem::is_directory(options_.out_dir))
      throw Error("WriteFailed", "cannot create --out folder " + options_.out_dir + ": " +
                                     (ec ? ec.message() : "not a folder"));
  }
  if (!options_.report_file.empty()) {
    report_.open(options_.report_file, std::ios::trunc);
    if (!report_) throw Error("WriteFailed", "cannot write --report file " + options_.report_file);
  }
}

WatchedRuns::~WatchedRuns() = default;

WatchSession& WatchedRuns::start_session(std::shared_ptr<ProcessTree> tree,
                                         std::vector<std::string> extra_notes) {
  tree_ = std::move(tree);
  extra_notes_ = std::move(extra_notes);
  MonitorOptions mo;
  mo.process_probe = false;  // genscope's own memory is not the program's
  mo.nvml_probe = false;     // added below, scoped to the tree
  mo.sample_interval = std::chrono::microseconds(static_cast<long>(options_.interval_ms * 1000));
  mo.max_sample_interval =
      std::chrono::microseconds(static_cast<long>(options_.max_interval_ms * 1000));
  configure_metrics(options_.metrics, mo);
  monitor_ = std::make_unique<Monitor>(mo);
  metrics_endpoint_ = attach_metrics_endpoint(options_.metrics, *monitor_, command_);
  otlp_ = make_otlp_exporter(options_.metrics);
  if (!options_.out_dir.empty()) {  // the run in progress on disk, for a kill -9 of genscope
    monitor_->add_sink(
        make_journal_sink(std::filesystem::path(options_.out_dir) / "run.journal.json"));
  }
  monitor_->add_probe(tree_->make_probe());
  monitor_->add_probe(make_nvml_probe(options_.nvml_library, tree_));
  WatchOptions wo;
  wo.run.pipeline.name = options_.pipeline.empty() ? default_pipeline_ : options_.pipeline;
  wo.run.pipeline.model = options_.model;
  wo.run.labels = parse_labels(options_.labels);
  wo.recognizers = split_list(options_.recognizers);
  wo.runs = options_.runs == "program"     ? RunScope::kProgram
            : options_.runs == "announced" ? RunScope::kAnnounced
                                           : RunScope::kAuto;
  for (const std::string& f : options_.rule_files) wo.rule_files.emplace_back(f);
  wo.on_run_finished = [this](Run&& run) { handle(std::move(run)); };
  session_ = std::make_unique<WatchSession>(*monitor_, std::move(wo));
  return *session_;
}

void WatchedRuns::handle(Run&& finished) noexcept {
  ++runs_;
  try {
    Run run = std::move(finished);
    if (tree_ != nullptr) {
      run.attachments.push_back(tree_->take_summary());
      for (std::string& note : tree_->notes()) run.notes.push_back(std::move(note));
    }
    for (const std::string& note : extra_notes_) run.notes.push_back(note);
    for (const std::string& note : ending_notes_) run.notes.push_back(note);
    if (!ending_exit_label_.empty()) run.labels["watch.exit"] = ending_exit_label_;
    if (has_targets_) run.attachments.push_back(performance_attachment(run, targets_));
    export_otlp(otlp_.get(), run);  // the run as it is saved; a failure is in its document
    emit(run);
  } catch (const Error& e) {
    warn("[" + e.name() + "] " + e.what());
  } catch (const std::exception& e) {
    warn(e.what());
  }
}

namespace {

// Runs `what`; an exception is named in a warning (prefixed by `context`), never passed on:
// each output of a run is written on its own, so one that fails leaves the others.
template <class F>
void independently(const std::string& context, F&& what) noexcept {
  try {
    what();
  } catch (const Error& e) {
    warn("[" + e.name() + "] " + context + e.what());
  } catch (const std::exception& e) {
    warn(context + e.what());
  } catch (...) {
    warn(context + "non-standard exception");
  }
}

}  // namespace

void WatchedRuns::emit(Run& run) {
  std::string document, document_line, exports_line;
  if (!options_.out_dir.empty()) {
    // The first run is run.json (the usual single run), later ones run-2.json, ... A file
    // that cannot be written goes to a fallback place (docs/run.md, "Outputs"), never lost.
    independently("run document not written: ", [&] {
      const std::filesystem::path path =
          std::filesystem::path(options_.out_dir) /
          (runs_ == 1 ? std::string("run.json") : "run-" + std::to_string(runs_) + ".json");
      std::ostringstream said, errors;
      const SavedRunDocument saved = save_run_document(run, path, options_.json_fallback);
      print_run_document_outcome(saved, said, errors);
      document_line = said.str();
      if (!saved.outcome.path.empty()) document = saved.outcome.path.string();
      if (!errors.str().empty()) std::cerr << errors.str();
    });
  }
  if (options_.exports.any()) {
    ExportOptions nth = options_.exports;
    nth.html = nth_path(nth.html, runs_);
    nth.trace = nth_path(nth.trace, runs_);
    nth.csv = nth_path(nth.csv, runs_);
    std::ostringstream said;
    independently("", [&] { write_exports(std::span<const Run>(&run, 1), nth, said); });
    exports_line = said.str();  // the exports that were written
  }
  if (options_.record) {
    independently("run not recorded: ", [&] { record_run(history_path(options_.db), run); });
  }
  independently("metrics not pushed: ", [&] { report_metrics_push(options_.metrics, run, command_); });
  std::ostream& out = report_.is_open() ? static_cast<std::ostream&>(report_) : std::cerr;
  independently("report not printed: ", [&] {
    if (options_.quiet) {
      int failed = 0;
      for (const StepRecord& s : run.steps) failed += s.status == StepStatus::kFailed;
      out << "genscope: run " << runs_ << " '" << run.pipeline.name << "' "
          << format_duration(static_cast<double>(run.duration_ns), options_.plain) << ", "
          << run.steps.size() << " steps (" << failed << " failed), " << peak_text(run)
          << (document.empty() ? "" : ", " + document) << "\n";
      out.flush();
      return;
    }
    ConsoleOptions co;
    co.plain = options_.plain;
    co.verbose = options_.verbose;
    out << render_console(run, co);
    out << document_line << exports_line;
    out.flush();
  });
}

void WatchedRuns::set_ending(std::string note, std::string exit_label) {
  if (!note.empty()) ending_notes_.push_back(std::move(note));
  if (!exit_label.empty()) ending_exit_label_ = std::move(exit_label);
}

void WatchedRuns::finish() {
  session_.reset();
  monitor_.reset();  // joins the sampler before the tree goes away
}

}  // namespace genscope::cli
