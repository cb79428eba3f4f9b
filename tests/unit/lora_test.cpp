// Tests of src/lora: format detection, scale, the ||dW|| identity, key mapping in both UNet
// namings, fit reports, merges against NumPy, the patcher, and bad LoRAs leaving no output.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>

#include "genscope/error.hpp"
#include "genscope/lora.hpp"
#include "genscope/lora_report.hpp"
#include "genscope/model_diff.hpp"
#include "genscope/model_patcher.hpp"
#include "model/float_convert.hpp"
#include "unit/model_data.hpp"

namespace genscope {
namespace {

using testing::model_file;

std::vector<std::string> keys_of(const SafetensorsFile& f) {
  std::vector<std::string> keys;
  for (const auto& e : f.entries()) keys.push_back(e.name);
  return keys;
}

std::filesystem::path out_path(const std::string& name) {
  auto p = testing::model_data_dir() / "out" / name;
  std::filesystem::create_directories(p.parent_path());
  std::filesystem::remove(p);
  return p;
}

TEST(LoraFormat, DetectsEveryFamilyAndKeepsUnknownKeys) {
  const std::vector<std::string> keys = {
      "lora_unet_down_blocks_0_attentions_0_proj_in.lora_down.weight",
      "lora_unet_down_blocks_0_attentions_0_proj_in.lora_up.weight",
      "lora_unet_down_blocks_0_attentions_0_proj_in.alpha",
      "lora_unet_down_blocks_0_attentions_0_proj_in.dora_scale",
      "lora_unet_down_blocks_0_resnets_0_conv1.lora_mid.weight",
      "unet.mid_block.attentions.0.proj_out.lora_A.weight",
      "unet.mid_block.attentions.0.proj_out.lora_B.weight",
      "transformer.single_blocks.0.linear1.lora_A.default.weight",
      "transformer.single_blocks.0.linear1.lora_B.default.weight",
      "text_encoder.text_model.encoder.layers.0.mlp.fc1.lora.down.weight",
      "text_encoder.text_model.encoder.layers.0.mlp.fc1.lora.up.weight",
      "unet.up_blocks.1.attentions.0.transformer_blocks.0.attn1.processor.to_q_lora.down.weight",
      "unet.up_blocks.1.attentions.0.transformer_blocks.0.attn1.processor.to_q_lora.up.weight",
      "text_encoder_2.text_model.encoder.layers.1.self_attn.q_proj.lora_linear_layer.down.weight",
      "text_encoder_2.text_model.encoder.layers.1.self_attn.q_proj.lora_linear_layer.up.weight",
      "unet.mid_block.attentions.0.proj_out.lora_magnitude_vector",
      "lora_te1_text_model_encoder_layers_0_mlp_fc2.hada_w1_a",
      "lora_te1_text_model_encoder_layers_0_mlp_fc2.hada_w1_b",
      "lora_te1_text_model_encoder_layers_0_mlp_fc2.hada_w2_a",
      "lora_te1_text_model_encoder_layers_0_mlp_fc2.hada_w2_b",
      "lora_te2_text_model_encoder_layers_0_mlp_fc2.lokr_w1",
      "lora_te2_text_model_encoder_layers_0_mlp_fc2.lokr_w2_a",
      "lora_te2_text_model_encoder_layers_0_mlp_fc2.lokr_w2_b",
      "lora_unet_conv_in.diff",
      "lora_unet_conv_in.diff_b",
      "lora_unet_out_0.w_norm",
      "lora_unet_out_0.b_norm",
      "lora_unet_out_2.set_weight",
      "lora_te3_encoder_block_0_layer_0_SelfAttention_q.lora_down.weight",
      "something.completely.different",
  };
  std::vector<std::string> unknown;
  const auto modules = group_lora_keys(keys, &unknown);
  ASSERT_EQ(unknown, std::vector<std::string>{"something.completely.different"});
  std::map<std::string, LoraModule> by_name;
  for (const auto& m : modules) by_name[m.name] = m;
  ASSERT_EQ(by_name.size(), 13u);
  const auto& kohya = by_name.at("lora_unet_down_blocks_0_attentions_0_proj_in");
  EXPECT_EQ(kohya.type, LoraModuleType::kLora);
  EXPECT_EQ(kohya.naming, LoraNaming::kKohya);
  EXPECT_EQ(kohya.target, LoraTarget::kUnet);
  EXPECT_TRUE(kohya.dora);
  EXPECT_EQ(kohya.tensors.size(), 4u);
  EXPECT_EQ(by_name.at("lora_unet_down_blocks_0_resnets_0_conv1").tensors.count("mid"), 1u);
  const auto& peft = by_name.at("unet.mid_block.attentions.0.proj_out");
  EXPECT_EQ(peft.naming, LoraNaming::kPeft);
  EXPECT_TRUE(peft.dora);
  EXPECT_EQ(peft.tensors.at("down"), "unet.mid_block.attentions.0.proj_out.lora_A.weight");
  EXPECT_EQ(by_name.at("transformer.single_blocks.0.linear1").target, LoraTarget::kTransformer);
  EXPECT_EQ(by_name.at("text_encoder.text_model.encoder.layers.0.mlp.fc1").naming, LoraNaming::kDiffusersOld);
  EXPECT_EQ(by_name.at("text_encoder.text_model.encoder.layers.0.mlp.fc1").target, LoraTarget::kTextEncoder);
  EXPECT_EQ(by_name.count("unet.up_blocks.1.attentions.0.transformer_blocks.0.attn1.processor.to_q"), 1u);
  EXPECT_EQ(by_name.at("text_encoder_2.text_model.encoder.layers.1.self_attn.q_proj").target,
            LoraTarget::kTextEncoder2);
  EXPECT_EQ(by_name.at("lora_te1_text_model_encoder_layers_0_mlp_fc2").type, LoraModuleType::kLoha);
  EXPECT_EQ(by_name.at("lora_te2_text_model_encoder_layers_0_mlp_fc2").type, LoraModuleType::kLokr);
  EXPECT_EQ(by_name.at("lora_te2_text_model_encoder_layers_0_mlp_fc2").target, LoraTarget::kTextEncoder2);
  EXPECT_EQ(by_name.at("lora_unet_conv_in").type, LoraModuleType::kDiff);
  EXPECT_EQ(by_name.at("lora_unet_out_0").type, LoraModuleType::kNorm);
  EXPECT_EQ(by_name.at("lora_unet_out_2").type, LoraModuleType::kSetWeight);
  EXPECT_EQ(by_name.at("lora_te3_encoder_block_0_layer_0_SelfAttention_q").target, LoraTarget::kT5);
}

TEST(LoraAnalysis, ScaleIsAlphaOverRankOrOneWithoutAlpha) {
  const auto lora = LoraFile::open(model_file("sd15_kohya.safetensors"));
  // make_models.py cycles alpha through 2, none, 0, 4 at rank 4.
  const auto* a2 = lora->module("lora_unet_down_blocks_0_attentions_0_proj_in");
  ASSERT_NE(a2, nullptr);
  std::map<double, int> seen;
  for (const auto& m : lora->modules()) {
    if (m.target != LoraTarget::kUnet) continue;
    EXPECT_EQ(m.rank, 4) << m.name;
    const double expected = m.alpha ? *m.alpha / 4.0 : 1.0;  // ComfyUI: alpha 0 scales by 0
    EXPECT_DOUBLE_EQ(m.scale, expected) << m.name;
    ++seen[m.alpha ? *m.alpha : -1.0];
  }
  EXPECT_GT(seen[2.0], 0);
  EXPECT_GT(seen[-1.0], 0);
  EXPECT_GT(seen[0.0], 0);
  EXPECT_GT(seen[4.0], 0);
  EXPECT_EQ(lora->arch(), ModelArch::kSD1);
  EXPECT_TRUE(lora->unknown_keys().empty());
}

TEST(LoraAnalysis, TraceIdentityMatchesExplicitProduct) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  for (auto [m, r, n] : {std::tuple{37, 5, 23}, std::tuple{64, 16, 80}, std::tuple{3, 1, 1}}) {
    std::vector<float> up(m * r), down(r * n);
    for (float& x : up) x = nd(rng);
    for (float& x : down) x = nd(rng);
    double explicit2 = 0;
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double s = 0;
        for (int k = 0; k < r; ++k) s += static_cast<double>(up[i * r + k]) * down[k * n + j];
        explicit2 += s * s;
      }
    EXPECT_NEAR(lora_delta_norm(up.data(), down.data(), m, r, n), std::sqrt(explicit2),
                1e-9 * std::sqrt(explicit2));
  }
}

TEST(LoraAnalysis, NormsMatchNumPy) {
  const auto lora = LoraFile::open(model_file("sd15_kohya.safetensors"));
  std::ifstream in(model_file("sd15_kohya_norms.json"));
  const auto norms = nlohmann::json::parse(in);
  ASSERT_EQ(norms.size(), lora->modules().size());
  for (const auto& [name, value] : norms.items()) {
    const LoraModule* m = lora->module(name);
    ASSERT_NE(m, nullptr) << name;
    EXPECT_NEAR(m->delta_norm, value.get<double>(), 1e-4 * value.get<double>() + 1e-7) << name;
  }
}

TEST(LoraAnalysis, LohaAndLokrNormsMatchTheirDeltas) {
  for (const char* file : {"sd15_loha.safetensors", "sd15_lokr.safetensors"}) {
    const auto lora = LoraFile::open(model_file(file));
    ASSERT_FALSE(lora->modules().empty());
    for (const auto& m : lora->modules()) {
      const auto d = lora->delta(m);
      double s = 0;
      for (float x : d) s += static_cast<double>(x) * x;
      EXPECT_NEAR(m.delta_norm, std::sqrt(s), 1e-4 * std::sqrt(s)) << file << " " << m.name;
    }
  }
}

TEST(LoraAnalysis, DoraFileIsFlagged) {
  const auto lora = LoraFile::open(model_file("sd15_dora.safetensors"));
  ASSERT_EQ(lora->modules().size(), 1u);
  EXPECT_TRUE(lora->modules()[0].dora);
  EXPECT_EQ(lora->modules()[0].naming, LoraNaming::kPeft);
  EXPECT_EQ(lora->modules()[0].target, LoraTarget::kTextEncoder);
}

TEST(KeyMapping, UnetStructureIsReadFromKeys) {
  const auto xl = SafetensorsFile::open(model_file("sdxl.safetensors"));
  const auto config = unet_config_from_keys(keys_of(xl));
  ASSERT_TRUE(config);
  EXPECT_EQ(config->num_res_blocks, (std::vector<int>{2, 2, 2}));
  EXPECT_EQ(config->transformer_depth, (std::vector<int>{0, 0, 2, 2, 10, 10}));
  EXPECT_EQ(config->transformer_depth_output, (std::vector<int>{10, 10, 10, 2, 2, 2, 0, 0, 0}));
  EXPECT_EQ(config->transformer_depth_middle, 10);
  EXPECT_EQ(detect_model_arch(keys_of(xl)), ModelArch::kSDXL);

  const auto ldm = SafetensorsFile::open(model_file("sd15.safetensors"));
  const auto dif = SafetensorsFile::open(model_file("sd15_diffusers.safetensors"));
  const auto from_ldm = unet_config_from_keys(keys_of(ldm));
  const auto from_dif = unet_config_from_keys(keys_of(dif));
  ASSERT_TRUE(from_ldm && from_dif);
  EXPECT_EQ(from_ldm->num_res_blocks, (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(from_ldm->transformer_depth, from_dif->transformer_depth);
  EXPECT_EQ(from_ldm->transformer_depth_output, from_dif->transformer_depth_output);
  EXPECT_EQ(detect_model_arch(keys_of(ldm)), ModelArch::kSD1);
  EXPECT_EQ(detect_model_arch(keys_of(dif)), ModelArch::kSD1);
}

// The generated ldm<->diffusers map pairs exactly the tensors the generator wrote with equal
// values under both names (the script builds both names from the module tree, independently).
TEST(KeyMapping, GeneratedUnetMapPairsEqualTensors) {
  const auto ldm = SafetensorsFile::open(model_file("sd15.safetensors"));
  const auto dif = SafetensorsFile::open(model_file("sd15_diffusers.safetensors"));
  const auto map = unet_to_diffusers(*unet_config_from_keys(keys_of(ldm)));
  std::size_t checked = 0;
  for (const auto& e : dif.entries()) {
    if (e.name.rfind("unet.", 0) != 0) continue;
    const std::string d = e.name.substr(5);
    const auto it = map.find(d);
    ASSERT_NE(it, map.end()) << d;
    const SafetensorsEntry* l = ldm.find("model.diffusion_model." + it->second);
    ASSERT_NE(l, nullptr) << d << " -> " << it->second;
    ASSERT_EQ(l->shape, e.shape) << d;
    const auto a = detail::tensor_to_f32(ldm, *l);
    const auto b = detail::tensor_to_f32(dif, e);
    ASSERT_EQ(a, b) << d << " -> " << it->second;
    ++checked;
  }
  EXPECT_GT(checked, 600u);
}

TEST(KeyMapping, TransformerModelsMapGenericNames) {
  const std::vector<std::string> wan = {"model.diffusion_model.patch_embedding.weight",
                                        "model.diffusion_model.blocks.0.self_attn.q.weight",
                                        "model.diffusion_model.blocks.0.cross_attn.k.weight",
                                        "model.diffusion_model.blocks.0.ffn.0.weight"};
  EXPECT_EQ(detect_model_arch(wan), ModelArch::kWan);
  const auto map = lora_key_map(wan);
  // ComfyUI's model_lora_keys_unet has no Wan branch: only the generic names map.
  for (const char* name : {"diffusion_model.blocks.0.self_attn.q", "lora_unet_blocks_0_self_attn_q"}) {
    ASSERT_EQ(map.count(name), 1u) << name;
    EXPECT_EQ(map.at(name).key, "model.diffusion_model.blocks.0.self_attn.q.weight");
  }
  for (const char* name : {"transformer.blocks.0.self_attn.q", "transformer.blocks.0.attn1.to_q",
                           "lycoris_blocks_0_self_attn_q", "lora_transformer_blocks_0_self_attn_q"}) {
    EXPECT_EQ(map.count(name), 0u) << name;
  }
  const std::vector<std::string> flux = {"model.diffusion_model.double_blocks.0.img_attn.qkv.weight",
                                         "model.diffusion_model.single_blocks.0.linear1.weight"};
  EXPECT_EQ(detect_model_arch(flux), ModelArch::kFlux);
  EXPECT_EQ(lora_key_map(flux).at("lora_unet_double_blocks_0_img_attn_qkv").key,
            "model.diffusion_model.double_blocks.0.img_attn.qkv.weight");
  std::string evidence;
  EXPECT_EQ(detect_lora_arch({"lora_unet_double_blocks_0_img_attn_qkv"}, &evidence), ModelArch::kFlux);
  EXPECT_EQ(detect_lora_arch({"transformer.transformer_blocks.0.img_mlp.net.0.proj"}, &evidence),
            ModelArch::kQwenImage);
  EXPECT_EQ(detect_model_arch({"model.diffusion_model.joint_blocks.0.x_block.attn.qkv.weight"}), ModelArch::kSD3);
}

TEST(LoraFit, KohyaLoraLoadsOntoBothNamings) {
  const auto lora = LoraFile::open(model_file("sd15_kohya.safetensors"));
  for (const char* base_name : {"sd15.safetensors", "sd15_diffusers.safetensors"}) {
    const auto base = SafetensorsFile::open(model_file(base_name));
    const LoraFit fit = fit_lora(*lora, base);
    EXPECT_EQ(fit.matched.size(), lora->modules().size()) << base_name;
    EXPECT_TRUE(fit.lora_keys_not_loaded.empty()) << base_name;
    EXPECT_TRUE(fit.not_loaded.empty()) << base_name;
    EXPECT_TRUE(fit.shape_mismatches.empty()) << base_name << " " << (fit.shape_mismatches.empty() ? "" : fit.shape_mismatches[0]);
    EXPECT_TRUE(fit.fits()) << fit.verdict;
  }
}

TEST(LoraFit, ReportsMissingWeightsAndUnknownKeys) {
  const auto lora = LoraFile::open(model_file("sd15_kohya.safetensors"));
  const auto pruned = SafetensorsFile::open(model_file("sd15_pruned.safetensors"));
  const LoraFit fit = fit_lora(*lora, pruned);
  // ComfyUI builds the pruned weights from the config and patches them: not "NOT LOADED".
  EXPECT_TRUE(fit.not_loaded.empty());
  ASSERT_EQ(fit.missing_from_file.size(), 2u);
  EXPECT_EQ(fit.matched.size(), lora->modules().size() - 2);
  EXPECT_FALSE(fit.fits());

  const auto peft = LoraFile::open(model_file("sd15_peft.safetensors"));
  EXPECT_EQ(peft->unknown_keys(), std::vector<std::string>{"unet.some_adapter.extra_state"});
  // ComfyUI maps diffusers attention only as ...processor.to_q: the PEFT attention modules
  // (2 tensors each) and the unknown key are "lora key not loaded", on either naming.
  for (const char* base_name : {"sd15_diffusers.safetensors", "sd15.safetensors"}) {
    const LoraFit pf = fit_lora(*peft, SafetensorsFile::open(model_file(base_name)));
    EXPECT_EQ(pf.lora_keys_not_loaded.size(), 2u * 24 + 1) << base_name;
    EXPECT_EQ(pf.matched.size(), 3u) << base_name;
  }
}

TEST(LoraFit, Sd15LoraOnSdxlBaseGetsAVerdict) {
  const auto lora = LoraFile::open(model_file("sd15_kohya.safetensors"));
  const auto xl = SafetensorsFile::open(model_file("sdxl.safetensors"));
  const LoraFit fit = fit_lora(*lora, xl);
  EXPECT_TRUE(fit.architecture_mismatch);
  EXPECT_NE(fit.verdict.find("this LoRA was trained for SD1.x; the base is SDXL"), std::string::npos) << fit.verdict;
  EXPECT_GT(fit.lora_keys_not_loaded.size(), 50u);
  EXPECT_FALSE(fit.shape_mismatches.empty());  // overlapping names, different widths
  // ComfyUI maps lora_te_ onto SDXL's CLIP-L: those modules do load.
  EXPECT_FALSE(fit.matched.empty());
  const auto json = nlohmann::json(fit);
  EXPECT_EQ(json["lora_key_not_loaded_count"], fit.lora_keys_not_loaded.size());
}

TEST(LoraFit, SdxlLoraUsesOpenClipChunks) {
  const auto lora = LoraFile::open(model_file("sdxl_kohya.safetensors"));
  EXPECT_EQ(lora->arch(), ModelArch::kSDXL);
  const auto xl = SafetensorsFile::open(model_file("sdxl.safetensors"));
  const LoraFit fit = fit_lora(*lora, xl);
  EXPECT_TRUE(fit.fits()) << nlohmann::json(fit).dump();
  int chunked = 0;
  for (const auto& [module, target] : fit.matched) chunked += target.chunks == 3;
  EXPECT_EQ(chunked, 6);
}

// Compares every tensor of two files after conversion to float32.
void expect_same_model(const std::filesystem::path& got_path, const std::filesystem::path& want_path,
                       float rtol) {
  const auto got = SafetensorsFile::open(got_path);
  const auto want = SafetensorsFile::open(want_path);
  ASSERT_EQ(got.entries().size(), want.entries().size());
  std::size_t differing = 0;
  for (const auto& w : want.entries()) {
    const SafetensorsEntry* g = got.find(w.name);
    ASSERT_NE(g, nullptr) << w.name;
    ASSERT_EQ(g->dtype, w.dtype) << w.name;
    ASSERT_EQ(g->shape, w.shape) << w.name;
    const auto a = detail::tensor_to_f32(got, *g);
    const auto b = detail::tensor_to_f32(want, w);
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (std::fabs(a[i] - b[i]) > rtol * std::fabs(b[i]) + 1e-6f) {
        ++differing;
        ADD_FAILURE() << w.name << "[" << i << "]: " << a[i] << " vs NumPy " << b[i];
        break;
      }
    }
  }
  EXPECT_EQ(differing, 0u);
}

TEST(LoraMerge, MatchesNumPyReference) {
  struct Case {
    const char* base;
    const char* lora;
    double strength;
    const char* expected;
    float rtol;
  };
  for (const Case& c : {Case{"sd15.safetensors", "sd15_kohya.safetensors", 0.8, "expected_sd15_kohya.safetensors", 2e-3f},
                        Case{"sd15_diffusers.safetensors", "sd15_peft.safetensors", 1.0, "expected_sd15_peft.safetensors", 1e-5f},
                        Case{"sd15.safetensors", "sd15_loha.safetensors", 1.0, "expected_sd15_loha.safetensors", 2e-3f},
                        Case{"sd15.safetensors", "sd15_lokr.safetensors", 0.5, "expected_sd15_lokr.safetensors", 2e-3f},
                        Case{"sdxl.safetensors", "sdxl_kohya.safetensors", 1.0, "expected_sdxl_kohya.safetensors", 1.6e-2f}}) {
    SCOPED_TRACE(c.lora);
    const auto out = out_path(std::string("merged_") + c.lora);
    const LoraMergeResult r = merge_lora(model_file(c.base), model_file(c.lora), out, c.strength);
    EXPECT_GT(r.weights_patched, 0u);
    expect_same_model(out, model_file(c.expected), c.rtol);
  }
}

TEST(LoraMerge, BadInputsLeaveNoOutput) {
  struct Case {
    const char* base;
    const char* lora;
    const char* error;
    const char* names;
  };
  for (const Case& c : {Case{"sd15.safetensors", "bad_missing_half.safetensors", "LoraMissingHalf", "attn1_to_q"},
                        Case{"sd15.safetensors", "bad_rank_mismatch.safetensors", "LoraRankMismatch", "attn1_to_k"},
                        Case{"sd15.safetensors", "bad_nan.safetensors", "LoraNaN", "attn1_to_v"},
                        Case{"sdxl.safetensors", "sd15_kohya.safetensors", "LoraArchitectureMismatch", "SDXL"}}) {
    SCOPED_TRACE(c.lora);
    const auto out = out_path("bad_output.safetensors");
    try {
      merge_lora(model_file(c.base), model_file(c.lora), out, 1.0);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.name(), c.error) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.names), std::string::npos) << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(out));
    for (const auto& f : std::filesystem::directory_iterator(out.parent_path())) {
      EXPECT_EQ(f.path().filename().string().find("bad_output"), std::string::npos) << f.path();
    }
  }
}

TEST(ModelPatcher, UuidAndCloneSemantics) {
  const auto lora = LoraFile::open(model_file("sd15_kohya.safetensors"));
  const auto base_file = SafetensorsFile::open(model_file("sd15.safetensors"));
  ModelPatcher original(snapshot_from_safetensors(model_file("sd15.safetensors")));
  const ModelSnapshot before = original.snapshot();
  EXPECT_EQ(before.patches_count, 0);
  EXPECT_EQ(before.patches_uuid.size(), 36u);

  ModelPatcher clone = original.clone();  // ComfyUI: clone + add_patches
  EXPECT_NE(clone.id(), original.id());
  EXPECT_EQ(clone.patches_uuid(), original.patches_uuid());
  const LoraFit fit = fit_lora(*lora, base_file);
  const auto keys = clone.add_patches(lora, fit, 0.8);
  EXPECT_EQ(keys.size(), fit.matched.size());
  EXPECT_NE(clone.patches_uuid(), original.patches_uuid());
  EXPECT_EQ(original.patches_count(), 0u);
  EXPECT_EQ(clone.patches_count(), fit.base_weights_patched);

  const ModelDiff d = diff_snapshots(before, clone.snapshot());
  EXPECT_TRUE(d.identity.model_cloned);
  EXPECT_TRUE(d.identity.uuid_changed);
  EXPECT_FALSE(d.identity.class_changed);
  EXPECT_EQ(d.identity.patches_added, static_cast<std::int64_t>(fit.base_weights_patched));

  ModelPatcher second = clone.clone();
  EXPECT_EQ(second.patches_count(), clone.patches_count());
  EXPECT_EQ(second.patches_uuid(), clone.patches_uuid());
  second.add_patch(keys[0], PatchEntry{1.0, WeightPatch{lora, fit.matched[0].first, fit.matched[0].second}, 1.0});
  EXPECT_EQ(second.patches().at(keys[0]).size(), clone.patches().at(keys[0]).size() + 1);
  EXPECT_NE(second.patches_uuid(), clone.patches_uuid());
  EXPECT_THROW(second.add_patch("no.such.key", PatchEntry{}), Error);
  const std::string uuid = second.patches_uuid();
  second.clear_patches();
  EXPECT_NE(second.patches_uuid(), uuid);
  EXPECT_EQ(second.patches_count(), 0u);
}

TEST(LoraReport, ApplicationReportHasSeedSections) {
  const auto lora_path = model_file("sd15_kohya.safetensors");
  const auto lora = LoraFile::open(lora_path);
  const auto base_file = SafetensorsFile::open(model_file("sd15.safetensors"));
  ModelPatcher unet(snapshot_from_safetensors(model_file("sd15.safetensors")));
  unet.set_devices("cpu", "cuda:0", "cpu");
  LoraApplicationObservation obs;
  obs.lora_path = lora_path;
  obs.unet_before = unet.snapshot();
  ModelPatcher patched = unet.clone();
  const LoraFit fit = fit_lora(*lora, base_file);
  patched.add_patches(lora, fit, 0.8);
  patched.set_devices("cuda:0", "cuda:0", "cpu");
  obs.unet_after = patched.snapshot();
  obs.unet_patcher = &patched;
  obs.fit = fit;
  obs.memory_allocated_before_bytes = 1 << 20;
  obs.memory_allocated_after_bytes = 3 << 20;
  obs.success = true;
  obs.models_returned = 2;
  const nlohmann::json j = lora_application_report(obs);
  EXPECT_EQ(j["baseline"]["lora_file"]["filename"], "sd15_kohya.safetensors");
  EXPECT_EQ(j["baseline"]["lora_file"]["file_exists"], true);
  EXPECT_EQ(j["unet_changes"]["model_cloned"], true);
  EXPECT_EQ(j["unet_changes"]["uuid_changed"], true);
  EXPECT_EQ(j["unet_changes"]["patches_added"], fit.base_weights_patched);
  EXPECT_EQ(j["unet_lora_patches"]["total_patched_keys"], fit.base_weights_patched);
  const auto& details = j["unet_lora_patches"]["patch_details"];
  ASSERT_FALSE(details.empty());
  EXPECT_EQ(details.begin().value()["patch_type"], "lora");
  EXPECT_DOUBLE_EQ(details.begin().value()["strength_patch"].get<double>(), 0.8);
  EXPECT_EQ(j["placement_changes"]["unet"]["model_device_changed"], true);
  EXPECT_DOUBLE_EQ(j["memory_impact"]["unet_memory_change"]["allocated_change_mb"].get<double>(), 2.0);
  EXPECT_EQ(j["lora_application_success"], true);
  EXPECT_EQ(j["fit"]["matched_count"], fit.matched.size());
  const Attachment a = lora_application_attachment(obs);
  EXPECT_EQ(a.type, "lora_application");
  EXPECT_EQ(a.data, j);
}

}  // namespace
}  // namespace genscope
