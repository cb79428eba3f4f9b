// `genscope compare A B [--a-runs R..] [--b-runs R..] [--label k=v] [--targets F]
//  [--target SPEC] [--db PATH] [--json]`: per-step before/after comparison.
// A, B and the --x-runs are run files, history ids, or "label:k=v" selectors.
#include <iostream>

#include "command.hpp"
#include "genscope/compare.hpp"
#include "genscope/targets.hpp"
#include "run_selection.hpp"

namespace genscope::cli {

void register_compare_command(CLI::App& app, CommandContext& context) {
  struct Options {
    std::string a, b, db, targets_file;
    std::vector<std::string> a_runs, b_runs, labels, target_specs;
    bool json = false;
    double alpha = 0.01, min_effect = 0.05;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("compare", "Compare runs (before A, after B) step by step");
  cmd->add_option("a", o->a, "Before: run file, history id or label:k=v")->required();
  cmd->add_option("b", o->b, "After: run file, history id or label:k=v")->required();
  cmd->add_option("--a-runs", o->a_runs, "More runs on the before side");
  cmd->add_option("--b-runs", o->b_runs, "More runs on the after side");
  cmd->add_option("--label", o->labels, "k=v filter applied to label: selectors");
  cmd->add_option("--targets", o->targets_file, "Targets file (JSON) for the score change");
  cmd->add_option("--target", o->target_specs, "Target spec, e.g. run.max=5s");
  cmd->add_option("--db", o->db, "History database (default: XDG data dir)");
  cmd->add_option("--alpha", o->alpha, "Mann-Whitney significance level (default 0.01)");
  cmd->add_option("--min-effect", o->min_effect, "Minimum relative change (default 0.05)");
  cmd->add_flag("--json", o->json, "JSON output");
  cmd->callback([o, &context] {
    const auto filter = parse_labels(o->labels);
    std::vector<Run> before, after;
    auto add = [&](std::vector<Run>& side, const std::string& ref) {
      for (auto& r : resolve_runs(ref, o->db, filter)) side.push_back(std::move(r));
    };
    add(before, o->a);
    for (const auto& r : o->a_runs) add(before, r);
    add(after, o->b);
    for (const auto& r : o->b_runs) add(after, r);
    std::optional<Targets> targets;
    if (!o->targets_file.empty())
      targets = read_targets_file(o->targets_file, after.front().pipeline.name);
    if (!o->target_specs.empty()) {
      if (!targets) targets = Targets{};
      for (const auto& spec : o->target_specs) apply_target_spec(*targets, spec);
    }
    CompareOptions options;
    options.alpha = o->alpha;
    options.min_effect = o->min_effect;
    const RunComparison c =
        compare_groups(before, after, targets ? &*targets : nullptr, options);
    if (o->json)
      std::cout << to_json(c).dump(2) << "\n";
    else
      std::cout << render_comparison(c);
    context.exit_code = 0;
  });
}

}  // namespace genscope::cli
