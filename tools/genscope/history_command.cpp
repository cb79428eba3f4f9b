// `genscope history [--db PATH] list|show|add|export|prune|regressions`: the run history.
// `regressions` exits 1 when a regression is found.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "command.hpp"
#include "genscope/error.hpp"
#include "genscope/history.hpp"
#include "genscope/regression.hpp"
#include "genscope/report.hpp"
#include "genscope/run_json.hpp"
#include "genscope/targets.hpp"
#include "run_selection.hpp"

namespace genscope::cli {
namespace {

struct HistoryOptions {
  std::string db;
  std::string pipeline;
  std::vector<std::string> labels;
  std::size_t limit = 0;
  bool json = false;
  std::string id;
  std::vector<std::string> files;
  bool csv = false;
  std::string output;
  std::string older_than;
  std::size_t window = 20;
  std::size_t latest = 1;
};

void list(const HistoryOptions& o) {
  HistoryStore store(history_path(o.db));
  HistoryQuery query{o.pipeline, parse_labels(o.labels), o.limit};
  const auto runs = store.list(query);
  if (o.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : runs)
      out.push_back({{"run_id", r.run_id}, {"start_utc", r.start_utc}, {"pipeline", r.pipeline},
                     {"model", r.model}, {"architecture", r.architecture}, {"host", r.host},
                     {"gpu", r.gpu}, {"params_hash", r.params_hash}, {"total_ns", r.total_ns},
                     {"peak_rss_bytes", r.peak_rss_bytes}, {"peak_gpu_bytes", r.peak_gpu_bytes},
                     {"score", r.score}});
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::printf("%-34s %-24s %-16s %10s %12s %6s\n", "id", "start", "pipeline", "total",
              "peak GPU", "score");
  for (const auto& r : runs) {
    char score[16] = "-";
    if (!std::isnan(r.score)) std::snprintf(score, sizeof score, "%.1f", r.score);
    std::printf("%-34s %-24s %-16s %9.3fs %12s %6s\n", r.run_id.c_str(), r.start_utc.c_str(),
                r.pipeline.c_str(), static_cast<double>(r.total_ns) / 1e9,
                std::isnan(r.peak_gpu_bytes) ? "-" : format_bytes(r.peak_gpu_bytes).c_str(),
                score);
  }
}

void show(const HistoryOptions& o) {
  HistoryStore store(history_path(o.db));
  const auto doc = store.document(o.id);
  if (!doc) throw Error("RunNotFound", "no run \"" + o.id + "\" in " + store.path().string());
  if (o.json)
    std::cout << doc->dump(2) << "\n";
  else
    std::cout << render_console(run_from_json(*doc));
}

int regressions(const HistoryOptions& o) {
  HistoryStore store(history_path(o.db));
  RegressionOptions options;
  options.pipeline = o.pipeline;
  options.window = o.window;
  options.latest = o.latest;
  const auto findings = find_regressions(store.observations(o.pipeline), options);
  bool any = false;
  for (const auto& f : findings) any = any || f.regression;
  if (o.json) {
    std::cout << to_json(findings).dump(2) << "\n";
  } else {
    for (const auto& f : findings) {
      if (!f.regression) continue;
      std::printf("REGRESSION %s / %s: %.3f s vs baseline median %.3f s (%+.1f%%, z %.1f, %zu runs)\n",
                  f.pipeline.c_str(), f.step.c_str(), f.latest_ns / 1e9,
                  f.baseline_median_ns / 1e9, f.change_percent, f.z, f.baseline_runs);
    }
    std::printf("%zu series checked, %s\n", findings.size(),
                any ? "regressions found" : "no regression");
  }
  return any ? 1 : 0;
}

}  // namespace

void register_history_command(CLI::App& app, CommandContext& context) {
  auto o = std::make_shared<HistoryOptions>();
  CLI::App* history = app.add_subcommand("history", "The run history (SQLite)");
  history->require_subcommand(1);
  history->fallthrough();
  history->add_option("--db", o->db, "History database (default: $XDG_DATA_HOME/genscope/history.db)");

  CLI::App* list_cmd = history->add_subcommand("list", "List stored runs, newest first");
  list_cmd->add_option("--pipeline", o->pipeline, "Only this pipeline");
  list_cmd->add_option("--label", o->labels, "k=v label filter");
  list_cmd->add_option("--limit", o->limit, "At most N runs");
  list_cmd->add_flag("--json", o->json, "JSON output");
  list_cmd->callback([o, &context] {
    list(*o);
    context.exit_code = 0;
  });

  CLI::App* show_cmd = history->add_subcommand("show", "Show one stored run");
  show_cmd->add_option("id", o->id, "Run id or unique prefix")->required();
  show_cmd->add_flag("--json", o->json, "Print the run document");
  show_cmd->callback([o, &context] {
    show(*o);
    context.exit_code = 0;
  });

  CLI::App* add_cmd = history->add_subcommand("add", "Store run documents");
  add_cmd->add_option("runs", o->files, "Run documents (run.json)")->required();
  add_cmd->callback([o, &context] {
    HistoryStore store(history_path(o->db));
    for (const auto& f : o->files) std::cout << store.insert(read_run_file(f)) << "\n";
    context.exit_code = 0;
  });

  CLI::App* export_cmd = history->add_subcommand("export", "Export the history");
  export_cmd->add_flag("--csv", o->csv, "CSV (the only format)")->required();
  export_cmd->add_option("-o,--output", o->output, "Output file (default: stdout)");
  export_cmd->add_option("--pipeline", o->pipeline, "Only this pipeline");
  export_cmd->callback([o, &context] {
    HistoryStore store(history_path(o->db));
    const std::string csv = store.export_csv({o->pipeline, {}, 0});
    if (o->output.empty())
      std::cout << csv;
    else
      write_file_atomic(o->output, csv);
    context.exit_code = 0;
  });

  CLI::App* prune_cmd = history->add_subcommand("prune", "Delete old runs");
  prune_cmd->add_option("--older-than", o->older_than, "Age, e.g. 30d, 12h")->required();
  prune_cmd->callback([o, &context] {
    HistoryStore store(history_path(o->db));
    const auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    const auto cutoff = now_ns - static_cast<std::int64_t>(parse_duration_ns(o->older_than));
    std::cout << "pruned " << store.prune(cutoff) << " runs\n";
    context.exit_code = 0;
  });

  CLI::App* regress_cmd = history->add_subcommand("regressions", "Detect regressions");
  regress_cmd->add_option("--pipeline", o->pipeline, "Only this pipeline");
  regress_cmd->add_option("--window", o->window, "Baseline runs (default 20)");
  regress_cmd->add_option("--latest", o->latest, "Latest runs compared (default 1)");
  regress_cmd->add_flag("--json", o->json, "JSON output");
  regress_cmd->callback([o, &context] { context.exit_code = regressions(*o); });
}

}  // namespace genscope::cli
