// The LoRA fit against ComfyUI's own rules: for every (base, LoRA) pair tests/data/make_models.py
// writes (complete SD1.5 / SDXL / SD3 / Flux / Wan / Qwen-Image layouts, LoRAs named as kohya
// sd-scripts, diffusers PEFT, LyCORIS, OneTrainer, ai-toolkit and musubi-tuner name them), the
// generator takes what ComfyUI's LoraLoader prints and applies from the answers ComfyUI's own
// code gave on the model it builds (tests/fixtures/comfy_answers/, recorded by
// tests/data/record_comfy_answers.sh); genscope's fit must give the same sets. Plus the targets' details (row windows, transposition, identity
// weights, bias keys, split fused weights) and malformed input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>

#include "genscope/error.hpp"
#include "genscope/lora.hpp"
#include "model/float_convert.hpp"
#include "unit/model_data.hpp"

namespace genscope {
namespace {

using testing::model_file;

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

const nlohmann::json& cases() {
  static const nlohmann::json j = [] {
    std::ifstream in(model_file("comfy_cases.json"));
    return nlohmann::json::parse(in);
  }();
  return j;
}

TEST(ComfyFit, EveryPairMatchesComfyUIsRules) {
  ASSERT_GE(cases().size(), 31u);
  for (const auto& c : cases()) {
    const std::string base_name = c["base"], lora_name = c["lora"];
    SCOPED_TRACE(lora_name + " on " + base_name);
    const auto lora = LoraFile::open(model_file(lora_name), /*norms=*/false);
    const auto base = SafetensorsFile::open(model_file(base_name));
    const LoraFit fit = fit_lora(*lora, base, LoraLoader::kComfyUI);
    EXPECT_EQ(fit.loader, LoraLoader::kComfyUI);
    EXPECT_EQ(!fit.loader_failures.empty(), !c["error"].is_null()) << fit.verdict;
    if (!c["error"].is_null()) {
      EXPECT_TRUE(fit.matched.empty());
      continue;
    }
    EXPECT_EQ(fit.lora_keys_not_loaded, c["lora_key_not_loaded"].get<std::vector<std::string>>());
    EXPECT_EQ(sorted(fit.not_loaded), sorted(c["not_loaded"].get<std::vector<std::string>>()));
    EXPECT_EQ(sorted(fit.missing_from_file), sorted(c["missing_from_file"].get<std::vector<std::string>>()));
    // File tensors patched; the loader's built-in weights (an identity text_projection the
    // file lacks) separately, by the loader's model key.
    std::map<std::string, std::set<std::string>> applied, builtin;
    for (const LoraPatchedTensor& t : fit.patched_tensors()) applied[t.module].insert(t.key);
    for (const auto& b : fit.builtin_patched) builtin[b.module].insert(b.weight);
    std::map<std::string, std::set<std::string>> want, want_builtin;
    for (const auto& [module, keys] : c["applied"].items()) {
      for (const auto& k : keys) want[module].insert(k.get<std::string>());
    }
    for (const auto& [module, keys] : c["builtin"].items()) {
      for (const auto& k : keys) want_builtin[module].insert(k.get<std::string>());
    }
    EXPECT_EQ(applied, want);
    EXPECT_EQ(builtin, want_builtin);
    std::set<std::pair<std::string, std::string>> shadowed, want_shadowed;
    for (const auto& s : fit.shadowed) shadowed.emplace(s.module, s.by);
    for (const auto& s : c["shadowed"]) want_shadowed.emplace(s[0], s[1]);
    EXPECT_EQ(shadowed, want_shadowed);
    EXPECT_EQ(fit.tensors_loaded + fit.lora_keys_not_loaded.size(), fit.lora_tensors);
  }
}

TEST(ComfyFit, DetectsEveryFamilyFromTheBase) {
  const std::map<std::string, ModelArch> want = {
      {"sd15.safetensors", ModelArch::kSD1},        {"sd15_diffusers.safetensors", ModelArch::kSD1},
      {"sdxl.safetensors", ModelArch::kSDXL},       {"sd3.safetensors", ModelArch::kSD3},
      {"flux.safetensors", ModelArch::kFlux},       {"flux_diffusers.safetensors", ModelArch::kFlux},
      {"wan.safetensors", ModelArch::kWan},         {"wan_diffusers.safetensors", ModelArch::kWan},
      {"qwen_image.safetensors", ModelArch::kQwenImage}};
  for (const auto& [file, arch] : want) {
    std::vector<std::string> keys;
    const auto base = SafetensorsFile::open(model_file(file));
    for (const auto& e : base.entries()) keys.push_back(e.name);
    EXPECT_EQ(detect_model_arch(keys), arch) << file;
  }
  const std::map<std::string, ModelArch> lora_want = {
      {"sd3_peft.safetensors", ModelArch::kSD3},  // joint attention + a second CLIP encoder
      {"sd3_kohya.safetensors", ModelArch::kSD3},     {"flux_kohya.safetensors", ModelArch::kFlux},
      {"flux_aitoolkit.safetensors", ModelArch::kFlux}, {"wan_musubi.safetensors", ModelArch::kWan},
      {"wan_peft.safetensors", ModelArch::kWan},      {"wan_original.safetensors", ModelArch::kWan},
      {"qwen_musubi.safetensors", ModelArch::kQwenImage}, {"qwen_peft.safetensors", ModelArch::kQwenImage},
      {"sdxl_kohya.safetensors", ModelArch::kSDXL},   {"sd15_kohya.safetensors", ModelArch::kSD1}};
  for (const auto& [file, arch] : lora_want) {
    EXPECT_EQ(LoraFile::open(model_file(file), false)->arch(), arch) << file;
  }
}

// The first matched target of `module`.
const LoraKeyTarget* target_of(const LoraFit& fit, const std::string& module) {
  for (const auto& [m, t] : fit.matched) {
    if (m == module) return &t;
  }
  return nullptr;
}

TEST(ComfyFit, TargetsCarryWindowsTranspositionAndIdentity) {
  {
    const auto lora = LoraFile::open(model_file("sdxl_onetrainer.safetensors"), false);
    const LoraFit fit = fit_lora(*lora, SafetensorsFile::open(model_file("sdxl.safetensors")));
    const LoraKeyTarget* te1 = target_of(fit, "lora_te1_text_projection");
    ASSERT_NE(te1, nullptr);
    EXPECT_TRUE(te1->materialize_identity);
    EXPECT_EQ(te1->key, "conditioner.embedders.0.transformer.text_projection.weight");
    EXPECT_EQ(te1->shape, (std::vector<std::int64_t>{12, 12}));
    const LoraKeyTarget* te2 = target_of(fit, "lora_te2_text_projection");
    ASSERT_NE(te2, nullptr);
    EXPECT_TRUE(te2->transpose);
    EXPECT_FALSE(te2->materialize_identity);
    EXPECT_EQ(te2->key, "conditioner.embedders.1.model.text_projection");
    const LoraKeyTarget* k = target_of(fit, "text_encoders.clip_g.transformer.text_model.encoder.layers.5.self_attn.k_proj");
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(k->key, "conditioner.embedders.1.model.transformer.resblocks.5.attn.in_proj_weight");
    EXPECT_EQ(k->chunk, 1);
    EXPECT_EQ(k->chunks, 3);
    EXPECT_EQ(k->row_window(24), (std::pair<std::int64_t, std::int64_t>{8, 8}));
    EXPECT_TRUE(fit.fits()) << fit.verdict;
  }
  {
    // Flux: diffusers names land on row windows of the fused qkv / linear1 (flux_to_diffusers).
    const auto lora = LoraFile::open(model_file("flux_aitoolkit.safetensors"), false);
    const LoraFit fit = fit_lora(*lora, SafetensorsFile::open(model_file("flux.safetensors")));
    const LoraKeyTarget* v = target_of(fit, "transformer.transformer_blocks.7.attn.to_v");
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->key, "double_blocks.7.img_attn.qkv.weight");
    EXPECT_EQ(v->row_offset, 32);
    EXPECT_EQ(v->rows, 16);
    const LoraKeyTarget* mlp = target_of(fit, "transformer.single_transformer_blocks.30.proj_mlp");
    ASSERT_NE(mlp, nullptr);
    EXPECT_EQ(mlp->key, "single_blocks.30.linear1.weight");
    EXPECT_EQ(mlp->row_window(112), (std::pair<std::int64_t, std::int64_t>{48, 64}));
    EXPECT_TRUE(fit.shape_mismatches.empty()) << fit.shape_mismatches.front();
  }
  {
    // The same fused qkv LoRA on a diffusers-layout Flux: one delta split over to_q/to_k/to_v.
    const auto lora = LoraFile::open(model_file("flux_kohya.safetensors"), false);
    const LoraFit fit = fit_lora(*lora, SafetensorsFile::open(model_file("flux_diffusers.safetensors")));
    std::vector<std::tuple<std::string, std::int64_t, std::int64_t>> pieces;
    for (const auto& [m, t] : fit.matched) {
      if (m == "lora_unet_double_blocks_18_img_attn_qkv") pieces.emplace_back(t.key, t.delta_row_offset, t.rows);
    }
    EXPECT_EQ(pieces, (std::vector<std::tuple<std::string, std::int64_t, std::int64_t>>{
                          {"transformer_blocks.18.attn.to_q.weight", 0, 16},
                          {"transformer_blocks.18.attn.to_k.weight", 16, 16},
                          {"transformer_blocks.18.attn.to_v.weight", 32, 16}}));
    EXPECT_TRUE(fit.shape_mismatches.empty());
  }
  {
    // Bias deltas: diff_b lands on <module>.bias; on a weight without bias it is NOT LOADED.
    const auto lora = LoraFile::open(model_file("sd15_full.safetensors"), false);
    const LoraFit fit = fit_lora(*lora, SafetensorsFile::open(model_file("sd15.safetensors")));
    const LoraKeyTarget* conv = target_of(fit, "lora_unet_conv_in");
    ASSERT_NE(conv, nullptr);
    EXPECT_EQ(conv->key, "model.diffusion_model.input_blocks.0.0.weight");
    EXPECT_EQ(conv->bias_key, "model.diffusion_model.input_blocks.0.0.bias");
    const LoraKeyTarget* q = target_of(fit, "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn1_to_q");
    ASSERT_NE(q, nullptr);
    EXPECT_TRUE(q->bias_key.empty());
    EXPECT_NE(std::find(fit.not_loaded.begin(), fit.not_loaded.end(),
                        "diffusion_model.input_blocks.1.1.transformer_blocks.0.attn1.to_q.bias"),
              fit.not_loaded.end());
  }
}

// Issue 21: ComfyUI's first key-map loop names every diffusion key generically
// ("diffusion_model.<key>", "lora_unet_<key _>"); their diff_b / b_norm patch "<key>.bias", and
// a diff on a bias's own name patches that bias. Checked against ComfyUI's own code by
// tests/peers/lora_comfyui.sh (v0.3.18 and newer).
TEST(ComfyFit, GenericSdxlNamesPatchBiases) {
  const auto lora = LoraFile::open(model_file("sdxl_generic.safetensors"), false);
  const LoraFit fit = fit_lora(*lora, SafetensorsFile::open(model_file("sdxl.safetensors")));
  EXPECT_TRUE(fit.fits()) << fit.verdict;
  const std::string b = "model.diffusion_model.input_blocks.4.1.";
  const std::map<std::string, std::pair<std::string, std::string>> want = {
      {"diffusion_model.input_blocks.4.1.proj_out", {b + "proj_out.weight", b + "proj_out.bias"}},
      {"lora_unet_input_blocks_4_1_norm", {b + "norm.weight", b + "norm.bias"}},
      {"diffusion_model.input_blocks.4.1.proj_in", {b + "proj_in.weight", b + "proj_in.bias"}},
      {"lora_unet_input_blocks_4_1_transformer_blocks_0_norm1",
       {b + "transformer_blocks.0.norm1.bias", b + "transformer_blocks.0.norm1.bias"}},
      {"diffusion_model.middle_block.1.proj_out.bias", {"model.diffusion_model.middle_block.1.proj_out.bias", ""}}};
  for (const auto& [module, keys] : want) {
    SCOPED_TRACE(module);
    const LoraKeyTarget* t = target_of(fit, module);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->key, keys.first);
    EXPECT_EQ(t->bias_key, keys.second);
  }
  EXPECT_EQ(fit.base_weights_patched, 8u);
  EXPECT_TRUE(fit.builtin_patched.empty());
  // Each bias patch is a patched tensor of its own (ComfyUI's patch dict has "<key>.bias").
  std::set<std::string> biases;
  for (const LoraPatchedTensor& t : fit.patched_tensors()) {
    if (t.bias) biases.insert(t.module + " -> " + t.key);
  }
  EXPECT_EQ(biases, (std::set<std::string>{
                        "diffusion_model.input_blocks.4.1.proj_out -> " + b + "proj_out.bias",
                        "lora_unet_input_blocks_4_1_norm -> " + b + "norm.bias",
                        "diffusion_model.input_blocks.4.1.proj_in -> " + b + "proj_in.bias",
                        "lora_unet_input_blocks_4_1_transformer_blocks_0_norm1 -> " + b + "transformer_blocks.0.norm1.bias"}));
  const nlohmann::json j = fit;
  EXPECT_EQ(j["patched"].size(), 8u);  // 3 weights, 4 bias patches, the diff on middle_block's bias
}

// Issue 21: lora_te1_text_projection on SD1.5 patches the text_projection ComfyUI's
// CLIPTextModel builds (identity-initialised); the checkpoint has no such tensor, so it is
// neither a patched file tensor nor "missing from this file".
TEST(ComfyFit, TextProjectionPatchesTheBuiltInIdentity) {
  for (const char* base_name : {"sd15.safetensors", "sd15_diffusers.safetensors"}) {
    SCOPED_TRACE(base_name);
    const auto lora = LoraFile::open(model_file("sd15_text_projection.safetensors"), false);
    const LoraFit fit = fit_lora(*lora, SafetensorsFile::open(model_file(base_name)));
    EXPECT_TRUE(fit.fits()) << fit.verdict;
    EXPECT_TRUE(fit.missing_from_file.empty());
    EXPECT_EQ(fit.base_weights_patched, 1u);  // the q_proj only
    ASSERT_EQ(fit.builtin_patched.size(), 1u);
    EXPECT_EQ(fit.builtin_patched[0].module, "lora_te1_text_projection");
    EXPECT_EQ(fit.builtin_patched[0].weight, "clip_l.transformer.text_projection.weight");
    EXPECT_EQ(fit.builtin_patched[0].what,
              "the clip_l text encoder's built-in text_projection (identity-initialised; not in the file)");
    const LoraKeyTarget* t = target_of(fit, "lora_te1_text_projection");
    ASSERT_NE(t, nullptr);
    EXPECT_TRUE(t->materialize_identity);  // what a merge writes as a new tensor
    EXPECT_EQ(t->shape, (std::vector<std::int64_t>{12, 12}));
    const nlohmann::json j = fit;
    EXPECT_EQ(j["base_weights_patched"], 1);
    EXPECT_EQ(j["builtin_patched_count"], 1);
    EXPECT_EQ(j["builtin_patched"][0]["weight"], "clip_l.transformer.text_projection.weight");
  }
}

TEST(ComfyFit, PrunedWeightsAreMissingFromTheFileNotNotLoaded) {
  const auto lora = LoraFile::open(model_file("sd15_kohya.safetensors"), false);
  const LoraFit fit = fit_lora(*lora, SafetensorsFile::open(model_file("sd15_pruned.safetensors")));
  EXPECT_TRUE(fit.not_loaded.empty());
  EXPECT_EQ(sorted(fit.missing_from_file),
            (std::vector<std::string>{"diffusion_model.input_blocks.1.1.transformer_blocks.0.attn1.to_k.weight",
                                      "diffusion_model.input_blocks.1.1.transformer_blocks.0.attn1.to_q.weight"}));
  EXPECT_FALSE(fit.fits());
  EXPECT_NE(fit.verdict.find("2 patch weights missing from this file"), std::string::npos) << fit.verdict;
}

TEST(ComfyFit, VerdictNamesTheLoaderAndTheOtherOne) {
  const auto lora = LoraFile::open(model_file("sd15_peft.safetensors"), false);
  const auto base = SafetensorsFile::open(model_file("sd15.safetensors"));
  const LoraFit fit = fit_lora(*lora, base);
  EXPECT_EQ(fit.verdict.rfind("comfyui: partial fit", 0), 0u) << fit.verdict;
  ASSERT_TRUE(fit.other_loader);
  EXPECT_EQ(fit.other_loader->loader, LoraLoader::kDiffusers);
  const nlohmann::json j = fit;
  EXPECT_EQ(j["loader"], "comfyui");
  EXPECT_EQ(j["lora_key_not_loaded_count"], fit.lora_keys_not_loaded.size());
  EXPECT_EQ(j["other_loader"]["loader"], "diffusers");
}

TEST(ComfyFit, UpWithoutDownFailsTheLoad) {
  const auto lora = LoraFile::open(model_file("bad_missing_half.safetensors"), false);
  const LoraFit fit = fit_lora(*lora, SafetensorsFile::open(model_file("sd15.safetensors")));
  ASSERT_EQ(fit.loader_failures.size(), 1u);
  EXPECT_EQ(fit.loader_failures[0].error, "LoraMissingHalf");
  EXPECT_NE(fit.loader_failures[0].message.find("attn1_to_q.lora_down.weight"), std::string::npos);
  EXPECT_EQ(fit.verdict.rfind("comfyui fails to load this LoRA", 0), 0u) << fit.verdict;
}

// Merges through row windows (Flux/SD3 fused qkv and linear1) and an identity-initialised
// text_projection written as a new tensor, against the generator's NumPy merge.
TEST(ComfyMerge, WindowsAndIdentityWeightsMatchNumPy) {
  for (const auto& [base_name, lora_name, expected] :
       {std::tuple{"flux.safetensors", "flux_aitoolkit.safetensors", "expected_flux_aitoolkit.safetensors"},
        std::tuple{"sd3.safetensors", "sd3_onetrainer.safetensors", "expected_sd3_onetrainer.safetensors"}}) {
    SCOPED_TRACE(lora_name);
    const auto out = testing::model_data_dir() / "out" / (std::string("merged_") + lora_name);
    std::filesystem::create_directories(out.parent_path());
    const LoraMergeResult r = merge_lora(model_file(base_name), model_file(lora_name), out, 1.0);
    EXPECT_GT(r.weights_patched, 0u);
    const auto got = SafetensorsFile::open(out);
    const auto want = SafetensorsFile::open(model_file(expected));
    ASSERT_EQ(got.entries().size(), want.entries().size());
    std::size_t changed = 0;
    const auto base = SafetensorsFile::open(model_file(base_name));
    for (const auto& w : want.entries()) {
      const SafetensorsEntry* g = got.find(w.name);
      ASSERT_NE(g, nullptr) << w.name;
      ASSERT_EQ(g->shape, w.shape) << w.name;
      ASSERT_EQ(g->dtype, w.dtype) << w.name;
      const auto a = detail::tensor_to_f32(got, *g);
      const auto b = detail::tensor_to_f32(want, w);
      for (std::size_t i = 0; i < a.size(); ++i) {
        ASSERT_NEAR(a[i], b[i], 2e-3f * std::fabs(b[i]) + 1e-3f) << w.name << "[" << i << "]";
      }
      const SafetensorsEntry* o = base.find(w.name);
      changed += o == nullptr || detail::tensor_to_f32(base, *o) != b;
    }
    EXPECT_GT(changed, 0u);
  }
}

// The diffusers profile, case by case; each expectation follows from the diffusers source
// (src/diffusers/loaders/lora_pipeline.py, lora_conversion_utils.py, utils/state_dict_utils.py
// at 019c4962): see the comment of each case.
struct DiffusersCase {
  const char* lora;
  const char* base;
  std::size_t matched;       // modules loaded
  std::size_t not_loaded;    // tensors not loaded
  const char* failure;       // substring of the failure, or nullptr
};

TEST(DiffusersFit, LoadsWhatLoadLoraWeightsLoads) {
  const DiffusersCase cases[] = {
      // kohya SD1.5: every key has a kohya prefix -> _convert_non_diffusers_lora_to_diffusers;
      // attention via ...processor.to_q_lora -> to_q.lora_A, the LoCon conv1 and the TE too.
      {"sd15_kohya.safetensors", "sd15.safetensors", 265, 0, nullptr},
      {"sd15_kohya.safetensors", "sd15_diffusers.safetensors", 265, 0, nullptr},
      // A key without "lora" (unet.some_adapter.extra_state): "Invalid LoRA checkpoint."
      {"sd15_peft.safetensors", "sd15_diffusers.safetensors", 0, 55, "Invalid LoRA checkpoint"},
      // LoHa keys are left over by the kohya converter: "have not been correctly renamed".
      {"sd15_loha.safetensors", "sd15.safetensors", 0, 50, "have not been correctly renamed"},
      // PEFT DoRA: lora_magnitude_vector survives both text-encoder conversions and loads.
      {"sd15_dora.safetensors", "sd15_diffusers.safetensors", 1, 0, nullptr},
      // SD3 PEFT: the last joint block's context branch is pre-only (no attn.to_add_out).
      {"sd3_peft.safetensors", "sd3.safetensors", 25, 2, nullptr},
      // Flux ai-toolkit names are the transformer's module paths.
      {"flux_aitoolkit.safetensors", "flux.safetensors", 28, 0, nullptr},
      // _convert_kohya_flux_lora_to_diffusers splits linear1 with dims=[3072, 3072, 3072,
      // 12288]: its assertion fails on this tiny Flux.
      {"flux_kohya.safetensors", "flux.safetensors", 0, 26, "AssertionError"},
      // Wan: diffusers names load as they are; musubi names through the musubi converter.
      {"wan_peft.safetensors", "wan.safetensors", 8, 0, nullptr},
      {"wan_musubi.safetensors", "wan.safetensors", 300, 0, nullptr},
      // Wan original names: k_img without v_img is not converted; the lycoris_ key is cut to
      // "_self_attn_q..." (k[len("diffusion_model."):] on every key) and is left over.
      {"wan_original.safetensors", "wan.safetensors", 0, 26, "should be empty"},
      // Qwen-Image musubi: convert_key keeps the protected n-grams (attn.to_q, img_mlp...).
      {"qwen_musubi.safetensors", "qwen_image.safetensors", 10, 0, nullptr},
  };
  for (const DiffusersCase& c : cases) {
    SCOPED_TRACE(std::string(c.lora) + " on " + c.base);
    const auto lora = LoraFile::open(model_file(c.lora), false);
    const LoraFit fit = fit_lora(*lora, SafetensorsFile::open(model_file(c.base)), LoraLoader::kDiffusers);
    EXPECT_EQ(fit.loader, LoraLoader::kDiffusers);
    std::set<std::string> modules;
    for (const auto& [m, t] : fit.matched) modules.insert(m);
    EXPECT_EQ(modules.size(), c.matched) << fit.verdict;
    EXPECT_EQ(fit.lora_keys_not_loaded.size(), c.not_loaded) << fit.verdict;
    if (c.failure == nullptr) {
      EXPECT_TRUE(fit.loader_failures.empty()) << fit.verdict;
      EXPECT_TRUE(fit.shape_mismatches.empty()) << fit.verdict;
      EXPECT_TRUE(fit.merge_unsupported.empty()) << fit.merge_unsupported.front().message;
    } else {
      ASSERT_EQ(fit.loader_failures.size(), 1u);
      EXPECT_NE(fit.loader_failures[0].message.find(c.failure), std::string::npos) << fit.loader_failures[0].message;
      EXPECT_EQ(fit.verdict.rfind("diffusers fails to load this LoRA", 0), 0u) << fit.verdict;
    }
  }
}

TEST(DiffusersFit, ProfilesDifferOnDiffusersNamedWan) {
  // ComfyUI has no Wan branch in model_lora_keys_unet: diffusers names are not loaded there.
  const auto lora = LoraFile::open(model_file("wan_peft.safetensors"), false);
  const auto base = SafetensorsFile::open(model_file("wan.safetensors"));
  const LoraFit comfy = fit_lora(*lora, base, LoraLoader::kComfyUI);
  EXPECT_TRUE(comfy.matched.empty());
  ASSERT_TRUE(comfy.other_loader);
  EXPECT_EQ(comfy.other_loader->summary, "diffusers would load these 16 tensors");
  EXPECT_EQ(comfy.other_loader->only_other_loads.size(), 16u);
  const LoraFit diffusers = fit_lora(*lora, base, LoraLoader::kDiffusers);
  const LoraKeyTarget* q = target_of(diffusers, "transformer.blocks.29.attn1.to_q");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->key, "blocks.29.self_attn.q.weight");  // diffusers' Wan rename, in the original file
}

TEST(ComfyFit, KeyOnlyMapAndMalformedNamesDoNotThrow) {
  // Names only (no shapes): windows stay unsized; odd names map to nothing.
  const std::vector<std::string> keys = {"double_blocks.0.img_attn.qkv.weight", "single_blocks.0.linear1.weight",
                                         "img_in.weight", "", ".", "..weight", "blocks.x.self_attn.q.weight",
                                         "input_blocks.0.0.weight", "joint_blocks.", "a.b.c"};
  EXPECT_NO_THROW(lora_key_map(keys));
  std::string evidence;
  EXPECT_EQ(detect_lora_arch({"", "_", "blocks_", "lora_unet_blocks"}, &evidence), ModelArch::kUnknown);
}

}  // namespace
}  // namespace genscope
