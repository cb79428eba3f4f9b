// `genscope model diff A B [--json]`: what changed between two safetensors checkpoints
// (keys, shapes, dtypes, values with ||W'-W|| and ||W'-W||/||W||), streaming both files.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "command.hpp"
#include "genscope/model_diff.hpp"
#include "genscope/report.hpp"

namespace genscope::cli {
namespace {

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

void print_diff(const ModelDiff& d, const std::string& a, const std::string& b, int top) {
  const WeightDiff& w = d.weights;
  std::printf("model diff\n  original: %s (%zu keys)\n  modified: %s (%zu keys)\n", a.c_str(),
              w.total_keys_original, b.c_str(), w.total_keys_modified);
  std::printf("  keys added %zu, removed %zu, common %zu, values changed %zu\n", w.keys_added.size(),
              w.keys_removed.size(), w.keys_common, w.values_changed);
  for (std::size_t i = 0; i < w.keys_added.size() && i < 10; ++i) std::printf("    + %s\n", w.keys_added[i].c_str());
  if (w.keys_added.size() > 10) std::printf("    + ... %zu more\n", w.keys_added.size() - 10);
  for (std::size_t i = 0; i < w.keys_removed.size() && i < 10; ++i) std::printf("    - %s\n", w.keys_removed[i].c_str());
  if (w.keys_removed.size() > 10) std::printf("    - ... %zu more\n", w.keys_removed.size() - 10);
  std::vector<const WeightChange*> changed;
  for (const WeightChange& c : w.changes) {
    if (c.shape_changed || c.dtype_changed) {
      std::printf("  %s: %s %s -> %s %s\n", c.key.c_str(), std::string(dtype_name(c.original_dtype)).c_str(),
                  shape_text(c.original_shape).c_str(), std::string(dtype_name(c.modified_dtype)).c_str(),
                  shape_text(c.modified_shape).c_str());
    }
    if (c.value_changed == 1) changed.push_back(&c);
  }
  std::sort(changed.begin(), changed.end(), [](const WeightChange* x, const WeightChange* y) {
    const double a = std::isnan(x->relative_delta) ? -1 : x->relative_delta;
    const double b = std::isnan(y->relative_delta) ? -1 : y->relative_delta;
    return a > b || (a == b && x->key < y->key);
  });
  if (!changed.empty()) {
    std::printf("  largest relative changes (||W'-W|| / ||W||):\n");
    for (int i = 0; i < top && i < static_cast<int>(changed.size()); ++i) {
      std::printf("    %10.3e  %10.3e  %s\n", changed[i]->relative_delta, changed[i]->delta_norm, changed[i]->key.c_str());
    }
    if (static_cast<int>(changed.size()) > top) std::printf("    ... %zu more\n", changed.size() - top);
  }
}

}  // namespace

void register_model_command(CLI::App& app, CommandContext& context) {
  CLI::App* model = app.add_subcommand("model", "Model checkpoints: compare");
  model->require_subcommand(1);
  struct Options {
    std::string a, b;
    bool json = false;
    int top = 20;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* diff = model->add_subcommand("diff", "What changed between two safetensors checkpoints");
  diff->add_option("A", opt->a, "Original checkpoint (.safetensors)")->required();
  diff->add_option("B", opt->b, "Modified checkpoint (.safetensors)")->required();
  diff->add_flag("--json", opt->json, "Machine-readable output");
  diff->add_option("--top", opt->top, "Changed keys to list (human output)");
  diff->callback([opt, &context] {
    const ModelDiff d = diff_safetensors(opt->a, opt->b);
    if (opt->json) {
      std::cout << nlohmann::json(d).dump(2) << "\n";
    } else {
      print_diff(d, opt->a, opt->b, opt->top);
    }
    context.exit_code = 0;
  });
}

}  // namespace genscope::cli
