// The reference pipeline on the tiny preset: every step with its analyses, identical output
// bytes for the same seed, the VAE encode fallback chain under a budget, and the LoRA merge
// (strength 0 bit-identical, strength 1 changes exactly the targeted keys).
#include "genscope/reference_pipeline.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

#include "genscope/error.hpp"
#include "genscope/report.hpp"

namespace fs = std::filesystem;
using genscope::Attachment;
using genscope::DemoOptions;
using genscope::DemoResult;

using genscope::StepRecord;
using genscope::StepStatus;

namespace {

fs::path scratch() {
  const char* env = std::getenv("GENSCOPE_TEST_TMP");
  fs::path p = env != nullptr ? fs::path(env) : fs::temp_directory_path() / "genscope-torch-test";
  fs::create_directories(p);
  return p;
}

DemoOptions tiny(const std::string& name) {
  DemoOptions o;
  o.preset = "tiny";
  o.steps = 3;
  o.threads = 1;
  o.out_dir = scratch() / name;
  o.cache_dir = scratch() / "cache";
  fs::remove_all(o.out_dir);
  return o;
}

DemoResult run_pipeline(const DemoOptions& o) {
  genscope::MonitorOptions mo;
  mo.nvml_probe = false;
  genscope::Monitor monitor(mo);
  DemoResult r = genscope::run_reference_pipeline(o, monitor);
  EXPECT_EQ(r.error, "");
  return r;
}

const StepRecord& step(const genscope::Run& run, const std::string& name) {
  const StepRecord* s = run.step(name);
  if (s == nullptr) throw std::runtime_error("no step " + name);
  return *s;
}

const Attachment* find_attachment(const StepRecord& s, const std::string& type,
                                  const std::string& name = {}) {
  for (const Attachment& a : s.attachments) {
    if (a.type == type && (name.empty() || a.name == name)) return &a;
  }
  return nullptr;
}

// "diffusion_model.a.b.weight" -> "lora_unet_a_b", as kohya names the module.
std::string kohya_name(const std::string& key) {
  std::string k = key.substr(16, key.size() - 16 - 7);
  for (char& c : k) c = c == '.' ? '_' : c;
  return "lora_unet_" + k;
}

}  // namespace

TEST(ReferencePipeline, TinyTextToImageRecordsEveryStep) {
  DemoOptions o = tiny("t2i");
  DemoResult r = run_pipeline(o);
  const genscope::Run& run = r.run;
  for (const char* name :
       {"model_loading", "load text_encoder", "load unet", "load vae", "lora_application",
        "text_encoding", "encode positive", "encode negative", "latent_generation", "sampling",
        "vae_decode", "save"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(step(run, name).status, StepStatus::kOk);
  }
  // Nested steps hang under their phase.
  EXPECT_EQ(step(run, "load unet").parent_id, step(run, "model_loading").id);
  EXPECT_EQ(step(run, "encode negative").parent_id, step(run, "text_encoding").id);
  // Model loading: file size, parameters per component.
  const StepRecord& unet = step(run, "load unet");
  EXPECT_GT(unet.counters.at("bytes"), 0);
  ASSERT_NE(find_attachment(unet, "model_component"), nullptr);
  EXPECT_TRUE(
      fs::exists(find_attachment(unet, "model_component")->data["file"].get<std::string>()));
  // Text encoding: per-prompt text analysis, conditioning analysis and a NumPy dump.
  const StepRecord& pos = step(run, "encode positive");
  const Attachment* text = find_attachment(pos, "text");
  ASSERT_NE(text, nullptr);
  EXPECT_EQ(text->data["characters"].get<std::size_t>(), o.prompt.size());
  const Attachment* cond = find_attachment(pos, "tensor");
  ASSERT_NE(cond, nullptr);
  EXPECT_EQ(cond->data["shape"], nlohmann::json({1, 77, 64}));
  EXPECT_EQ(cond->data["stats"]["nan_count"].get<int>(), 0);
  const std::string dump = cond->data["dump"].get<std::string>();
  const std::string cmd = std::string(GENSCOPE_PYTHON) +
                          " -c \"import numpy,sys; a=numpy.load(sys.argv[1]); "
                          "sys.exit(0 if a.shape==(1,77,64) and a.dtype==numpy.float32 else 1)\" " +
                          dump;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  // Latent generation: direct strategy, image latent with 64x spatial compression.
  const StepRecord& lat = step(run, "latent_generation");
  ASSERT_EQ(lat.attempts.size(), 1u);
  EXPECT_EQ(lat.attempts[0].strategy, "direct");
  const Attachment* latent = find_attachment(lat, "latent");
  ASSERT_NE(latent, nullptr);
  EXPECT_EQ(latent->data["shape"], nlohmann::json({1, 4, 8, 8}));
  EXPECT_DOUBLE_EQ(latent->data["spatial_compression"].get<double>(), 64.0);
  // Sampling: one iteration per step.
  EXPECT_EQ(step(run, "sampling").iteration_ns.size(), 3u);
  // Save: one PNG.
  ASSERT_EQ(r.images.size(), 1u);
  EXPECT_TRUE(fs::exists(r.images[0]));
  // Run-level usage statistics (seed 003).
  bool usage = false;
  for (const Attachment& a : run.attachments) usage = usage || a.type == "usage_statistics";
  EXPECT_TRUE(usage);
}

// The console report renders every attachment this pipeline produces with its curated
// section (seed layouts), in human units, never as the generic key/value tree.
TEST(ReferencePipeline, ReportCuratesEveryAttachment) {
  DemoOptions o = tiny("report");
  o.mode = "i2v";
  o.memory_budget_bytes = 1024;  // the whole fallback chain, down to zero latents
  DemoResult r = run_pipeline(o);
  std::set<std::string> types;
  for (const StepRecord& s : r.run.steps) {
    for (const Attachment& a : s.attachments) types.insert(a.type);
  }
  for (const Attachment& a : r.run.attachments) types.insert(a.type);
  EXPECT_EQ(types, (std::set<std::string>{"latent", "lora_application", "model_component",
                                          "model_state", "outputs", "tensor", "text", "usage",
                                          "usage_statistics"}));
  const std::string report = genscope::render_console(r.run, {.plain = true});
  for (const char* heading :
       {"COMPONENT \"dit\"", "LORA APPLICATION \"lora_dit.safetensors\": applied", "MODEL STATE \"models\"",
        "TEXT \"positive prompt\"", "TENSOR \"positive conditioning\" (conditioning)",
        "LATENT \"initial latent\": Video latent (B,C,T,H,W)", "Strategy used: emergency_zeros",
        "OUTPUTS \"images\": 9 file(s)", "MODEL USAGE STATISTICS (this run)",
        "MODEL USAGE STATISTICS (every run of this monitor so far)"}) {
    EXPECT_NE(report.find(heading), std::string::npos) << heading << "\n" << report;
  }
  EXPECT_EQ(report.find("\n    * "), std::string::npos) << report;  // no generic tree
  EXPECT_EQ(report.find("_ns: "), std::string::npos) << report;     // no raw nanoseconds
  EXPECT_EQ(report.find("e+0"), std::string::npos) << report;       // no exponent notation
  EXPECT_EQ(report.find("time unknown"), std::string::npos) << report;
}

TEST(ReferencePipeline, SameSeedGivesIdenticalBytes) {
  DemoOptions a = tiny("det_a"), b = tiny("det_b"), c = tiny("det_c");
  c.seed = a.seed + 1;
  const DemoResult ra = run_pipeline(a), rb = run_pipeline(b), rc = run_pipeline(c);
  ASSERT_EQ(ra.output_hash.size(), 16u);
  EXPECT_EQ(ra.output_hash, rb.output_hash);
  EXPECT_NE(ra.output_hash, rc.output_hash);
}

TEST(ReferencePipeline, BudgetShowsTheFallbackChain) {
  DemoOptions o = tiny("budget_tiled");
  o.memory_budget_bytes = genscope::parse_memory_size("1M");  // direct ~1.6 MB, tile ~0.4 MB
  DemoResult r = run_pipeline(o);
  const StepRecord& lat = step(r.run, "latent_generation");
  ASSERT_EQ(lat.attempts.size(), 2u);
  EXPECT_EQ(lat.attempts[0].strategy, "direct");
  EXPECT_EQ(lat.attempts[0].outcome, StepStatus::kFailed);
  EXPECT_NE(lat.attempts[0].error.find("OutOfMemoryBudget"), std::string::npos);
  EXPECT_EQ(lat.attempts[1].strategy, "tiled");
  EXPECT_EQ(lat.attempts[1].outcome, StepStatus::kOk);
  EXPECT_EQ(r.encode_strategy, "tiled");

  DemoOptions e = tiny("budget_zero");
  e.memory_budget_bytes = 1024;
  DemoResult re = run_pipeline(e);
  const StepRecord& lz = step(re.run, "latent_generation");
  ASSERT_EQ(lz.attempts.size(), 4u);
  const char* expected[] = {"direct", "tiled", "cpu_fallback", "emergency_zeros"};
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(lz.attempts[static_cast<std::size_t>(i)].strategy, expected[i]);
  EXPECT_EQ(lz.attempts[3].outcome, StepStatus::kOk);
  const Attachment* latent = find_attachment(lz, "latent");
  ASSERT_NE(latent, nullptr);
  EXPECT_EQ(latent->data["stats"]["max"].get<double>(), 0.0);
  EXPECT_EQ(latent->data["stats"]["min"].get<double>(), 0.0);
}

TEST(ReferencePipeline, LoraStrengthZeroIsBitIdenticalAndOneChangesExactlyTargets) {
  DemoOptions zero = tiny("lora0"), one = tiny("lora1");
  zero.lora_strength = 0.0;
  one.lora_strength = 1.0;
  const DemoResult r0 = run_pipeline(zero), r1 = run_pipeline(one);
  const Attachment* a0 = find_attachment(step(r0.run, "lora_application"), "lora_application");
  const Attachment* a1 = find_attachment(step(r1.run, "lora_application"), "lora_application");
  ASSERT_NE(a0, nullptr);
  ASSERT_NE(a1, nullptr);
  // genscope's lora_application_report (schema genscope.lora_application/1).
  EXPECT_EQ(a1->data["schema"], "genscope.lora_application/1");
  std::set<std::string> targets;
  for (const auto& [key, detail] : a1->data["unet_lora_patches"]["patch_details"].items()) {
    targets.insert(key);
    EXPECT_EQ(detail["patch_type"], "lora") << key;
    EXPECT_EQ(detail["module"], kohya_name(key)) << key;
  }
  EXPECT_GT(targets.size(), 0u);
  for (const std::string& k : targets) {
    EXPECT_TRUE(k.find(".attn1.to_") != std::string::npos ||
                k.find(".attn2.to_") != std::string::npos)
        << k;
  }
  EXPECT_EQ(a0->data["unet_lora_patches"]["total_patched_keys"].get<std::size_t>(), targets.size());
  // Strength 0 adds the patches (ComfyUI does) but W + 0·ΔW leaves every value as it was.
  EXPECT_EQ(a0->data["unet_weight_changes"]["values_changed"].get<int>(), 0);
  std::set<std::string> changed;
  for (const auto& [key, change] : a1->data["unet_weight_changes"]["changes"].items()) {
    if (change["value_changed"] == true) changed.insert(key);
  }
  EXPECT_EQ(changed, targets);
  EXPECT_TRUE(a1->data["unet_changes"]["model_cloned"].get<bool>());
  EXPECT_TRUE(a1->data["unet_changes"]["uuid_changed"].get<bool>());
  EXPECT_EQ(a1->data["unet_changes"]["patches_added"].get<std::size_t>(), targets.size());
  EXPECT_EQ(a1->data["fit"]["lora_key_not_loaded_count"].get<int>(), 0);
  EXPECT_EQ(a1->data["fit"]["not_loaded_count"].get<int>(), 0);
  EXPECT_EQ(a1->data["fit"]["matched_count"].get<std::size_t>(), targets.size());
  EXPECT_TRUE(a1->data["fit"]["fits"].get<bool>());
  EXPECT_NE(r0.output_hash, r1.output_hash);
}

// The first run on an empty cache generates the LoRA file inside the lora_application step;
// the report's baseline describes that file (it once said file_exists: false, having looked
// before the file was written).
TEST(ReferencePipeline, FirstRunOnAnEmptyCacheRecordsTheLoraFile) {
  DemoOptions o = tiny("lora_fresh_cache");
  o.cache_dir = scratch() / ("fresh-cache-" + std::to_string(::getpid()));
  fs::remove_all(o.cache_dir);
  const DemoResult r = run_pipeline(o);
  const Attachment* a = find_attachment(step(r.run, "lora_application"), "lora_application");
  ASSERT_NE(a, nullptr);
  const auto& file = a->data["baseline"]["lora_file"];
  const fs::path path = file["path"].get<std::string>();
  EXPECT_EQ(path.parent_path(), genscope::reference_cache_dir(o));
  ASSERT_TRUE(fs::is_regular_file(path));
  EXPECT_TRUE(file["file_exists"].get<bool>());
  EXPECT_EQ(file["file_size_bytes"].get<std::uint64_t>(), fs::file_size(path));
  fs::remove_all(o.cache_dir);
}

TEST(ReferencePipeline, TinyImageToVideo) {
  DemoOptions o = tiny("i2v");
  o.mode = "i2v";
  DemoResult r = run_pipeline(o);
  EXPECT_EQ(r.latent_shape, (std::vector<std::int64_t>{1, 16, 3, 4, 4}));
  EXPECT_EQ(r.images.size(), 9u);  // 4 * 3 - 3 frames
  const Attachment* latent = find_attachment(step(r.run, "latent_generation"), "latent");
  ASSERT_NE(latent, nullptr);
  EXPECT_EQ(latent->data["latent_layout"], "(B,C,T,H,W)");
  EXPECT_DOUBLE_EQ(latent->data["temporal_compression"].get<double>(), 3.0);
  EXPECT_EQ(step(r.run, "sampling").iteration_ns.size(), 3u);
  EXPECT_NE(step(r.run, "load dit").counters.count("bytes"), 0u);
}

TEST(ReferencePipeline, OptionsAreCheckedBeforeAnyWork) {
  DemoOptions o = tiny("opts");
  o.out_dir = "/proc/genscope-cannot-write-here";
  try {
    genscope::validate_demo_options(o);
    FAIL() << "expected OutputNotWritable";
  } catch (const genscope::Error& e) {
    EXPECT_EQ(e.name(), "OutputNotWritable");
  }
  o = tiny("opts");
  o.mode = "t2v";
  try {
    genscope::validate_demo_options(o);
    FAIL() << "expected InvalidOption";
  } catch (const genscope::Error& e) {
    EXPECT_EQ(e.name(), "InvalidOption");
  }
  o = tiny("opts");
  o.preset = "huge";
  EXPECT_THROW(genscope::validate_demo_options(o), genscope::Error);
  EXPECT_EQ(genscope::parse_memory_size("4096"), 4096);
  EXPECT_EQ(genscope::parse_memory_size("512M"), 512LL << 20);
  EXPECT_EQ(genscope::parse_memory_size("1.5GiB"), 3LL << 29);
  EXPECT_THROW(genscope::parse_memory_size("12 parsecs"), genscope::Error);
  EXPECT_THROW(genscope::parse_memory_size("-1"), genscope::Error);
}

TEST(ReferencePipeline, CacheFolderFollowsXdg) {
  DemoOptions o;
  o.preset = "tiny";
  ::setenv("XDG_CACHE_HOME", "/tmp/xdg-test", 1);
  EXPECT_EQ(genscope::reference_cache_dir(o), fs::path("/tmp/xdg-test/genscope/reference/tiny"));
}
