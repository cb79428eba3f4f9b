// `genscope validate RUN.json [--targets F] [--target SPEC].. [--json] [--record] [--db P]`:
// scores a run against its targets; exit 1 when a target is missed.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "command.hpp"
#include "genscope/history.hpp"
#include "genscope/run_json.hpp"
#include "genscope/validation.hpp"
#include "run_selection.hpp"

namespace genscope::cli {

void register_validate_command(CLI::App& app, CommandContext& context) {
  struct Options {
    std::string run, targets_file, db;
    std::vector<std::string> specs;
    bool json = false, record = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("validate", "Check a run against performance targets");
  cmd->add_option("run", o->run, "Run document (run.json)")->required();
  cmd->add_option("--targets", o->targets_file, "Targets file (JSON; default: run within 2-5 s)");
  cmd->add_option("--target", o->specs, "Target spec, e.g. sampling.min_it_per_s=4");
  cmd->add_flag("--json", o->json, "Print the performance document as JSON");
  cmd->add_flag("--record", o->record, "Store the run (with its performance) in the history");
  cmd->add_option("--db", o->db, "History database for --record");
  cmd->callback([o, &context] {
    Run run = read_run_file(o->run);
    Targets targets = o->targets_file.empty()
                          ? (o->specs.empty() ? Targets::defaults() : Targets{})
                          : read_targets_file(o->targets_file, run.pipeline.name);
    for (const auto& spec : o->specs) apply_target_spec(targets, spec);
    const Attachment performance = performance_attachment(run, targets);
    const auto& doc = performance.data;
    if (o->json) {
      std::cout << doc.dump(2) << "\n";
    } else {
      std::printf("architecture: %s\n", doc["architecture"].get<std::string>().c_str());
      for (const auto& r : doc["results"]) {
        const double score = r["score"].is_number() ? r["score"].get<double>() : NAN;
        std::printf("  %-4s %-12s %-28s score %5.1f%s%s\n", r["met"].get<bool>() ? "MET" : "MISS",
                    r["scope"].get<std::string>().c_str(), r["target"].get<std::string>().c_str(),
                    score, r.contains("note") ? "  " : "",
                    r.contains("note") ? r["note"].get<std::string>().c_str() : "");
      }
      const double overall = doc["score"].is_number() ? doc["score"].get<double>() : NAN;
      std::printf("overall: %s, score %.1f/100\n", doc["met"].get<bool>() ? "met" : "missed",
                  overall);
      for (const auto& d : doc["diagnostics"])
        std::printf("diagnostic %s [%s]: %s\n", d["id"].get<std::string>().c_str(),
                    d["step"].get<std::string>().c_str(), d["message"].get<std::string>().c_str());
      for (const auto& r : doc["recommendations"])
        std::printf("recommendation (%s): %s\n", r["diagnostic"].get<std::string>().c_str(),
                    r["text"].get<std::string>().c_str());
    }
    if (o->record) {
      run.attachments.erase(
          std::remove_if(run.attachments.begin(), run.attachments.end(),
                         [](const Attachment& a) { return a.type == "performance"; }),
          run.attachments.end());
      run.attachments.push_back(performance);
      record_run(history_path(o->db), run);
    }
    context.exit_code = doc["met"].get<bool>() ? 0 : 1;
  });
}

}  // namespace genscope::cli
