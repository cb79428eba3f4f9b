// `genscope lora inspect LORA [--base BASE] [--loader comfyui|diffusers] [--json]` and
// `genscope lora apply BASE LORA --strength S -o OUT [--loader comfyui|diffusers] [--json]`.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <future>
#include <iostream>
#include <map>
#include <set>

#include "command.hpp"
#include "genscope/lora.hpp"
#include "genscope/report.hpp"

namespace genscope::cli {
namespace {

void print_list(const char* title, const std::vector<std::string>& items, std::size_t limit) {
  if (items.empty()) return;
  std::printf("  %s (%zu):\n", title, items.size());
  for (std::size_t i = 0; i < items.size() && i < limit; ++i) std::printf("    %s\n", items[i].c_str());
  if (items.size() > limit) std::printf("    ... %zu more\n", items.size() - limit);
}

void print_counts(const char* title, const nlohmann::json& counts) {
  std::printf("  %-10s", title);
  for (const auto& [k, v] : counts.items()) std::printf(" %s=%d", k.c_str(), v.get<int>());
  std::printf("\n");
}

void print_inspection(const LoraFile& lora, const nlohmann::json& j) {
  std::printf("LoRA %s (%s, %zu tensors)\n", lora.path().string().c_str(),
              format_bytes(static_cast<double>(lora.file().file_size())).c_str(), lora.file().entries().size());
  std::printf("  modules    %zu, parameters %llu\n", lora.modules().size(),
              static_cast<unsigned long long>(j["parameters"].get<std::uint64_t>()));
  print_counts("types", j["by_type"]);
  print_counts("targets", j["by_target"]);
  print_counts("naming", j["by_naming"]);
  print_counts("ranks", j["by_rank"]);
  std::printf("  trained for %s%s%s\n", std::string(model_arch_name(lora.arch())).c_str(),
              lora.arch_evidence().empty() ? "" : ": ", lora.arch_evidence().c_str());
  std::vector<const LoraModule*> by_norm;
  for (const LoraModule& m : lora.modules()) {
    if (std::isfinite(m.delta_norm)) by_norm.push_back(&m);
  }
  std::sort(by_norm.begin(), by_norm.end(), [](auto* a, auto* b) { return a->delta_norm > b->delta_norm; });
  if (!by_norm.empty()) std::printf("  largest ||dW||_F (strength 1):\n");
  for (std::size_t i = 0; i < by_norm.size() && i < 10; ++i) {
    const LoraModule& m = *by_norm[i];
    std::printf("    %10.4g  %-5s r=%-3lld scale=%-6g %s\n", m.delta_norm,
                std::string(lora_module_type_name(m.type)).c_str(), static_cast<long long>(m.rank), m.scale,
                m.name.c_str());
  }
  print_list("unknown keys (kept, not loaded)", lora.unknown_keys(), 10);
}

void print_fit(const LoraFit& fit) {
  std::printf("fit against base (%s, %zu keys), loader %s\n", std::string(model_arch_name(fit.base_arch)).c_str(),
              fit.base_keys, std::string(lora_loader_name(fit.loader)).c_str());
  std::set<std::string> modules;
  for (const auto& [module, target] : fit.matched) modules.insert(module);
  std::set<std::string> biases;  // bias tensors patched (by diff_b / b_norm, or named themselves)
  for (const LoraPatchedTensor& t : fit.patched_tensors()) {
    if (t.key.ends_with("bias")) biases.insert(t.key);
  }
  const std::string of_which = biases.empty() ? "" : ", " + std::to_string(biases.size()) + " of them biases";
  std::printf("  matched %zu modules -> %zu base weights patched%s (%zu of %zu tensors loaded)\n", modules.size(),
              fit.base_weights_patched, of_which.c_str(), fit.tensors_loaded, fit.lora_tensors);
  std::printf("  lora key not loaded: %zu, NOT LOADED: %zu, missing from this file: %zu, shadowed: %zu, "
              "shape mismatches: %zu\n",
              fit.lora_keys_not_loaded.size(), fit.not_loaded.size(), fit.missing_from_file.size(),
              fit.shadowed.size(), fit.shape_mismatches.size());
  for (const auto& b : fit.builtin_patched) std::printf("  %s patches %s\n", b.module.c_str(), b.what.c_str());
  print_list("lora key not loaded", fit.lora_keys_not_loaded, 10);
  print_list("NOT LOADED", fit.not_loaded, 10);
  print_list("missing from this file (patched by the loader, absent here)", fit.missing_from_file, 10);
  std::vector<std::string> shadowed;
  for (const auto& s : fit.shadowed) shadowed.push_back(s.module + " (shadowed by " + s.by + " on " + s.key + ")");
  print_list("warning: shadowed modules (not applied)", shadowed, 10);
  print_list("shape mismatches", fit.shape_mismatches, 10);
  std::vector<std::string> failures, unsupported;
  for (const auto& f : fit.loader_failures) failures.push_back(f.message);
  for (const auto& f : fit.merge_unsupported) unsupported.push_back(f.message);
  print_list("loader fails", failures, 10);
  print_list("not mergeable by genscope", unsupported, 10);
  std::printf("  verdict: %s\n", fit.verdict.c_str());
  if (fit.other_loader && !fit.other_loader->summary.empty()) {
    std::printf("  other loader: %s\n", fit.other_loader->summary.c_str());
  }
}

// --loader: the two profile names.
CLI::Option* add_loader_option(CLI::App* cmd, LoraLoader& loader) {
  static const std::map<std::string, LoraLoader> kLoaders{{"comfyui", LoraLoader::kComfyUI},
                                                          {"diffusers", LoraLoader::kDiffusers}};
  return cmd->add_option("--loader", loader, "Whose loading rules: comfyui (default) or diffusers")
      ->transform(CLI::CheckedTransformer(kLoaders, CLI::ignore_case));
}

}  // namespace

void register_lora_command(CLI::App& app, CommandContext& context) {
  CLI::App* lora_cmd = app.add_subcommand("lora", "LoRA files: inspect, check against a base, merge");
  lora_cmd->require_subcommand(1);

  struct InspectOptions {
    std::string lora, base;
    bool json = false;
    LoraLoader loader = LoraLoader::kComfyUI;
  };
  auto in = std::make_shared<InspectOptions>();
  CLI::App* inspect = lora_cmd->add_subcommand("inspect", "Formats, ranks, scales, ||dW|| and fit to a base");
  inspect->add_option("LORA", in->lora, "LoRA file (.safetensors)")->required();
  inspect->add_option("--base", in->base, "Base checkpoint to check the LoRA against");
  inspect->add_flag("--json", in->json, "Machine-readable output");
  add_loader_option(inspect, in->loader);
  inspect->callback([in, &context] {
    // The base's header is read on a second thread while the LoRA is analysed (its errors
    // still come after the LoRA's).
    std::future<SafetensorsFile> base;
    if (!in->base.empty())
      base = std::async(std::launch::async | std::launch::deferred, [in] { return SafetensorsFile::open(in->base); });
    const auto lora = LoraFile::open(in->lora);
    nlohmann::json out{{"lora", lora_inspection_json(*lora)}};
    std::optional<LoraFit> fit;
    if (base.valid()) {
      fit = fit_lora(*lora, base.get(), in->loader);
      out["fit"] = *fit;
    }
    if (in->json) {
      std::cout << out.dump(2) << "\n";
    } else {
      print_inspection(*lora, out["lora"]);
      if (fit) print_fit(*fit);
    }
    // A LoRA made for another architecture is a failed check, as for a test runner.
    context.exit_code = fit && fit->architecture_mismatch ? 1 : 0;
  });

  struct ApplyOptions {
    std::string base, lora, out;
    double strength = 1.0;
    bool json = false;
    LoraLoader loader = LoraLoader::kComfyUI;
  };
  auto ap = std::make_shared<ApplyOptions>();
  CLI::App* apply = lora_cmd->add_subcommand("apply", "Merge a LoRA into a base checkpoint (atomic write)");
  apply->add_option("BASE", ap->base, "Base checkpoint (.safetensors)")->required();
  apply->add_option("LORA", ap->lora, "LoRA file (.safetensors)")->required();
  apply->add_option("--strength", ap->strength, "Strength multiplier")->required();
  apply->add_option("-o,--output", ap->out, "Output checkpoint")->required();
  apply->add_flag("--json", ap->json, "Machine-readable output");
  add_loader_option(apply, ap->loader);
  apply->callback([ap, &context] {
    const LoraMergeResult r = merge_lora(ap->base, ap->lora, ap->out, ap->strength, ap->loader);
    if (ap->json) {
      std::cout << nlohmann::json{{"output", ap->out},
                                  {"strength", ap->strength},
                                  {"loader", lora_loader_name(ap->loader)},
                                  {"modules_merged", r.modules_merged},
                                  {"weights_patched", r.weights_patched},
                                  {"bytes_written", r.bytes_written},
                                  {"patched_bytes", r.patched_bytes},
                                  {"fit", r.fit}}
                       .dump(2)
                << "\n";
    } else {
      std::printf("merged %zu modules into %zu weights (%s of %s) at strength %g -> %s\n", r.modules_merged,
                  r.weights_patched, format_bytes(static_cast<double>(r.patched_bytes)).c_str(),
                  format_bytes(static_cast<double>(r.bytes_written)).c_str(), ap->strength, ap->out.c_str());
      if (!r.fit.fits()) print_fit(r.fit);
    }
    context.exit_code = 0;
  });
}

}  // namespace genscope::cli
