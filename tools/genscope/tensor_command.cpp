// `genscope tensor info FILE[:NAME] [--role R] [--json]` and
// `genscope tensor diff A B [--rtol R --atol A] [--json]`: tensor dumps, analysed and compared.
// diff exits 0 when everything matches, 1 when something differs (a shape mismatch or a
// name on one side only is a difference), 2 on error (bad file).
#include <cmath>
#include <cstdio>
#include <iostream>

#include "command.hpp"
#include "genscope/error.hpp"
#include "genscope/report.hpp"
#include "genscope/run.hpp"
#include "genscope/tensor_analysis.hpp"
#include "genscope/tensor_set.hpp"

namespace genscope::cli {
namespace {

std::optional<TensorRole> parse_role(const std::string& s) {
  for (TensorRole r : {TensorRole::kConditioning, TensorRole::kPooled, TensorRole::kLatent,
                       TensorRole::kImage, TensorRole::kOther}) {
    if (role_name(r) == s) return r;
  }
  return std::nullopt;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string g(double v) {
  if (std::isnan(v)) return "n/a";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

void run_info(const std::string& spec, const std::string& role_text, bool json_output,
              bool plain) {
  const auto role = parse_role(role_text);
  if (!role) throw Error("InvalidArgument", "unknown --role '" + role_text + "'");
  const TensorSet set = TensorSet::open(spec);
  nlohmann::json all = nlohmann::json::array();
  std::string text;
  for (const TensorSet::Item& item : set.items()) {
    nlohmann::json j = tensor_analysis_json(item.view, *role);
    j["name"] = item.name;
    j["file"] = item.file;
    if (json_output) {
      all.push_back(std::move(j));
    } else {
      text += render_attachment(Attachment{"tensor", item.name, std::move(j)}, {.plain = plain});
    }
  }
  if (json_output) {
    std::cout << all.dump(2) << "\n";
  } else {
    std::cout << text;
  }
}

int run_diff(const std::string& a_spec, const std::string& b_spec, double rtol, double atol,
             bool json_output) {
  const TensorSet a = TensorSet::open(a_spec);
  const TensorSet b = TensorSet::open(b_spec);
  const TensorSetComparison c = compare_tensor_sets(a, b, CompareOptions{rtol, atol, 0});
  if (json_output) {
    nlohmann::json rows = nlohmann::json::array();
    for (const TensorSetRow& r : c.rows) {
      nlohmann::json row{{"name", r.name}, {"in_a", r.in_a}, {"in_b", r.in_b}};
      if (r.in_a && r.in_b) row["comparison"] = comparison_json(r.result);
      rows.push_back(std::move(row));
    }
    std::cout << nlohmann::json{{"a", a_spec},
                                {"b", b_spec},
                                {"rtol", rtol},
                                {"atol", atol},
                                {"matched", c.matched},
                                {"differing", c.differing},
                                {"only_a", c.only_a},
                                {"only_b", c.only_b},
                                {"match", c.all_match()},
                                {"tensors", rows}}
                     .dump(2)
              << "\n";
  } else {
    std::cout << "A: " << a_spec << "\nB: " << b_spec << "\nallclose: rtol " << g(rtol)
              << ", atol " << g(atol) << "\n\n";
    for (const TensorSetRow& r : c.rows) {
      if (!r.in_a || !r.in_b) {
        std::cout << (r.in_a ? "only in A: " : "only in B: ") << r.name << "\n";
        continue;
      }
      const TensorComparison& t = r.result;
      std::cout << (t.allclose ? "match  " : "DIFFER ") << r.name << "\n";
      if (!t.shape_match) {
        std::cout << "       shapes differ\n";
        continue;
      }
      std::cout << "       max abs " << g(t.max_abs_error) << ", mean abs " << g(t.mean_abs_error)
                << ", rmse " << g(t.rmse) << ", max rel " << g(t.max_rel_error) << ", cosine "
                << g(t.cosine_similarity) << ", psnr " << g(t.psnr_db) << " dB\n";
      if (!t.allclose) {
        std::cout << "       " << t.mismatch_count << " of " << t.numel << " elements differ";
        if (!t.worst_index.empty()) {
          std::cout << "; worst at " << shape_text(t.worst_index) << ": " << g(t.worst_a)
                    << " vs " << g(t.worst_b);
        }
        if (t.nan_mismatch_count > 0) std::cout << "; NaN in one only: " << t.nan_mismatch_count;
        std::cout << "\n";
      }
    }
    std::cout << "\n" << c.matched << " compared, " << c.differing << " differ, " << c.only_a
              << " only in A, " << c.only_b << " only in B: "
              << (c.all_match() ? "MATCH" : "DIFFERENT") << "\n";
  }
  return c.all_match() ? 0 : 1;
}

}  // namespace

void register_tensor_command(CLI::App& app, CommandContext& context) {
  CLI::App* cmd = app.add_subcommand("tensor", "Analyse and compare tensor dumps (.npy, .safetensors)");
  cmd->require_subcommand(1);

  struct InfoOptions {
    std::string spec;
    std::string role = "other";
    bool json = false;
    bool plain = false;
  };
  auto info = std::make_shared<InfoOptions>();
  CLI::App* info_cmd = cmd->add_subcommand("info", "Statistics and classification of tensors");
  info_cmd->add_option("file", info->spec, "FILE[.npy|.safetensors][:NAME] or a folder")->required();
  info_cmd->add_option("--role", info->role,
                       "conditioning | pooled | latent | image | other (classification to apply)");
  info_cmd->add_flag("--json", info->json, "Machine-readable output");
  info_cmd->add_flag("--plain", info->plain, "ASCII markers instead of emoji");
  info_cmd->callback([info, &context] {
    run_info(info->spec, info->role, info->json, info->plain);
    context.exit_code = 0;
  });

  struct DiffOptions {
    std::string a, b;
    double rtol = 1e-5;
    double atol = 1e-8;
    bool json = false;
  };
  auto diff = std::make_shared<DiffOptions>();
  CLI::App* diff_cmd = cmd->add_subcommand(
      "diff", "Compare two tensors, files or dump folders (exit 0 match, 1 differ, 2 error)");
  diff_cmd->add_option("a", diff->a, "A: file[:NAME] or folder")->required();
  diff_cmd->add_option("b", diff->b, "B (the reference): file[:NAME] or folder")->required();
  diff_cmd->add_option("--rtol", diff->rtol, "Relative tolerance (default 1e-5)");
  diff_cmd->add_option("--atol", diff->atol, "Absolute tolerance (default 1e-8)");
  diff_cmd->add_flag("--json", diff->json, "Machine-readable output");
  diff_cmd->callback([diff, &context] {
    context.exit_code = run_diff(diff->a, diff->b, diff->rtol, diff->atol, diff->json);
  });
}

}  // namespace genscope::cli
