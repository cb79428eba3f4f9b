// Tests of the perf module: targets, score formula, architecture detection, diagnostics,
// rules and usage statistics (statistics, comparisons, regressions: compare_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "genscope/error.hpp"
#include "genscope/targets.hpp"
#include "genscope/usage_stats.hpp"
#include "genscope/validation.hpp"
#include "unit/perf_runs.hpp"

namespace genscope {
namespace {

using namespace testing_runs;

// --- targets ---------------------------------------------------------------------------

TEST(Targets, DefaultsAreTheSeedWindow) {
  const Targets t = Targets::defaults();
  EXPECT_DOUBLE_EQ(*t.run.window_min_ns, 2e9);
  EXPECT_DOUBLE_EQ(*t.run.window_max_ns, 5e9);
  EXPECT_TRUE(t.steps.empty());
}

TEST(Targets, JsonFileWithWildcardAndPipelineOverride) {
  const auto doc = nlohmann::json::parse(R"({
    "schema": "genscope.targets/1",
    "pipelines": {
      "*": {"run": {"window_seconds": [2, 5]},
            "steps": {"sampling": {"min_it_per_s": 4, "max_peak_bytes": {"gpu0.used_bytes": "20GB"}}}},
      "wan": {"run": {"max_seconds": "90s"}, "steps": {"sampling": {"min_it_per_s": 0.5}}}
    }})");
  const Targets wan = targets_from_json(doc, "wan");
  EXPECT_DOUBLE_EQ(*wan.run.max_duration_ns, 90e9);
  EXPECT_DOUBLE_EQ(*wan.run.window_max_ns, 5e9);
  ASSERT_NE(wan.for_step("sampling"), nullptr);
  EXPECT_DOUBLE_EQ(*wan.for_step("sampling")->min_iterations_per_second, 0.5);
  EXPECT_DOUBLE_EQ(wan.for_step("sampling")->max_peak.at("gpu0.used_bytes"), 20e9);
  const Targets other = targets_from_json(doc, "sdxl");
  EXPECT_FALSE(other.run.max_duration_ns.has_value());
  EXPECT_DOUBLE_EQ(*other.for_step("sampling")->min_iterations_per_second, 4);
  // Round trip of one scope.
  const Target back = target_from_json(to_json(*wan.for_step("sampling")), "x");
  EXPECT_EQ(back.max_peak, wan.for_step("sampling")->max_peak);
}

TEST(Targets, InvalidFieldsNameTheField) {
  const auto doc = nlohmann::json::parse(R"({"pipelines": {"*": {"steps": {"vae": {"max_secs": 1}}}}})");
  try {
    targets_from_json(doc, "p");
    FAIL() << "expected InvalidTargets";
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "InvalidTargets");
    EXPECT_NE(std::string(e.what()).find("pipelines.*.steps.vae"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("max_secs"), std::string::npos);
  }
  const auto bad_window = nlohmann::json::parse(R"({"run": {"window_seconds": [5, 2]}})");
  EXPECT_THROW(targets_from_json(bad_window, "p"), Error);
  const auto negative = nlohmann::json::parse(R"({"run": {"max_seconds": -1}})");
  EXPECT_THROW(targets_from_json(negative, "p"), Error);
}

TEST(Targets, ReadFileErrors) {
  const std::string dir = std::getenv("GENSCOPE_TEST_TMP") ? std::getenv("GENSCOPE_TEST_TMP") : "/tmp";
  std::filesystem::create_directories(dir);
  const auto path = std::filesystem::path(dir) / "perf_targets_bad.json";
  std::ofstream(path) << "{not json";
  try {
    read_targets_file(path, "p");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "InvalidJson");
  }
  try {
    read_targets_file(path.string() + ".missing", "p");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "ReadFailed");
  }
}

TEST(Targets, CommandLineSpecs) {
  Targets t;
  apply_target_spec(t, "run.max=5s");
  apply_target_spec(t, "run.window=2s..5s");
  apply_target_spec(t, "sampling.max_peak.gpu0.used_bytes=20GiB");
  apply_target_spec(t, "sampling.min_it_per_s=4");
  EXPECT_DOUBLE_EQ(*t.run.max_duration_ns, 5e9);
  EXPECT_DOUBLE_EQ(*t.run.window_min_ns, 2e9);
  EXPECT_DOUBLE_EQ(t.for_step("sampling")->max_peak.at("gpu0.used_bytes"), 20.0 * (1ull << 30));
  EXPECT_DOUBLE_EQ(*t.for_step("sampling")->min_iterations_per_second, 4);
  for (const char* bad : {"run", "run.max", "run.max=fast", "run.color=1", "x.window=5s"}) {
    try {
      apply_target_spec(t, bad);
      FAIL() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.name(), "InvalidTargets") << bad;
    }
  }
}

TEST(Targets, DurationAndSizeParsing) {
  EXPECT_DOUBLE_EQ(parse_duration_ns("250ms"), 250e6);
  EXPECT_DOUBLE_EQ(parse_duration_ns("1.5min"), 90e9);
  EXPECT_DOUBLE_EQ(parse_duration_ns("7d"), 7 * 86400e9);
  EXPECT_DOUBLE_EQ(parse_duration_ns("3"), 3e9);
  EXPECT_DOUBLE_EQ(parse_size_bytes("512MiB"), 512.0 * 1048576);
  EXPECT_DOUBLE_EQ(parse_size_bytes("2GB"), 2e9);
  EXPECT_THROW(parse_duration_ns("5 parsecs"), Error);
  EXPECT_THROW(parse_size_bytes("lots"), Error);
}

// --- score ------------------------------------------------------------------------------

TEST(Score, FormulaMatchesSeedExample) {
  // Seed 004: 16 s against a 5 s target scored 31.2; 2.4 s scored 100.
  EXPECT_NEAR(score_ceiling(16, 5), 31.25, 1e-9);
  EXPECT_DOUBLE_EQ(score_ceiling(2.4, 5), 100);
  EXPECT_DOUBLE_EQ(score_ceiling(5, 5), 100);
  EXPECT_NEAR(score_ceiling(10, 5), 50, 1e-9);
  EXPECT_NEAR(score_floor(2, 4), 50, 1e-9);
  EXPECT_DOUBLE_EQ(score_floor(5, 4), 100);
  EXPECT_TRUE(std::isnan(score_ceiling(kNaN, 5)));
  // Continuous and monotone around the limit.
  EXPECT_GT(score_ceiling(5.001, 5), 99.9);
  EXPECT_GT(score_ceiling(6, 5), score_ceiling(7, 5));
}

TEST(Validation, MetTargetsScore100) {
  const genscope::Run run = make_run(2 * kSec);  // 3.5 s total
  const Validation v = validate(run, Targets::defaults());
  ASSERT_EQ(v.results.size(), 1u);
  EXPECT_TRUE(v.results[0].met);
  EXPECT_TRUE(v.met);
  EXPECT_DOUBLE_EQ(v.score, 100);
  EXPECT_EQ(v.architecture, Architecture::kMMDiT);
  EXPECT_FALSE(has_diagnostic(v, "dominant_step"));
}

TEST(Validation, MissedTargetsScoreAndGeometricMean) {
  const genscope::Run run = make_run(int64_t(8.5 * kSec));  // 10 s total
  Targets t = Targets::defaults();
  apply_target_spec(t, "sampling.min_it_per_s=4");  // 20 its in 8.5 s = 2.35 it/s
  apply_target_spec(t, "sampling.max_peak.gpu0.used_bytes=40GB");  // met (20 GB)
  const Validation v = validate(run, t);
  ASSERT_EQ(v.results.size(), 3u);
  EXPECT_FALSE(v.met);
  EXPECT_NEAR(v.results[0].score, 50, 1e-9);  // 5 s / 10 s
  const double its = 20 / 8.5;
  EXPECT_NEAR(v.results[1].actual, 20e9, 1);
  EXPECT_TRUE(v.results[1].met);
  EXPECT_NEAR(v.results[2].actual, its, 1e-9);
  EXPECT_NEAR(v.results[2].score, 100 * its / 4, 1e-9);
  EXPECT_NEAR(v.score, std::cbrt(50 * 100 * (100 * its / 4)), 1e-9);
  // The dominant step names sampling with its share of the run.
  ASSERT_TRUE(has_diagnostic(v, "dominant_step"));
  const auto& d = find_diagnostic(v.diagnostics, "dominant_step");
  EXPECT_EQ(d.step, "sampling");
  EXPECT_NEAR(d.evidence["share"].get<double>(), 0.85, 1e-9);
  // MMDiT + sampling picks the specific rule, citing the evidence.
  bool found = false;
  for (const auto& r : v.recommendations)
    if (r.diagnostic == "dominant_step") {
      found = true;
      EXPECT_NE(r.text.find("MMDiT"), std::string::npos);
      EXPECT_NEAR(r.evidence["share"].get<double>(), 0.85, 1e-9);
    }
  EXPECT_TRUE(found);
}

TEST(Validation, MissingStepIsNotScored) {
  Targets t;
  apply_target_spec(t, "upscale.max=1s");
  const Validation v = validate(make_run(kSec), t);
  ASSERT_EQ(v.results.size(), 1u);
  EXPECT_EQ(v.results[0].note, "step not found");
  EXPECT_TRUE(std::isnan(v.score));
  EXPECT_TRUE(v.met);
}

TEST(Validation, BeforeAfterScoreChange) {
  const Validation before = validate(make_run(int64_t(14.5 * kSec)), Targets::defaults());
  const Validation after = validate(make_run(int64_t(0.9 * kSec)), Targets::defaults());
  const auto change = score_change(before, after);
  EXPECT_NEAR(change["before_score"].get<double>(), 31.25, 1e-9);
  EXPECT_DOUBLE_EQ(change["after_score"].get<double>(), 100);
  EXPECT_TRUE(change["met_changed"].get<bool>());
}

TEST(Validation, PerformanceAttachment) {
  const Attachment a = performance_attachment(make_run(10 * kSec), Targets::defaults());
  EXPECT_EQ(a.type, "performance");
  EXPECT_EQ(a.data["schema"], "genscope.performance/1");
  EXPECT_FALSE(a.data["met"].get<bool>());
  EXPECT_EQ(a.data["targets"]["run"]["window_seconds"][1].get<double>(), 5);
  EXPECT_GT(a.data["recommendations"].size(), 0u);
}

// --- architecture -----------------------------------------------------------------------

TEST(Architecture, DetectsFamiliesFromParameterNames) {
  const std::vector<std::string> sd15 = {"model.diffusion_model.input_blocks.1.1.proj_in.weight",
                                          "first_stage_model.encoder.down.0.block.0.conv1.weight"};
  EXPECT_EQ(detect_architecture(sd15).architecture, Architecture::kUNet);
  const std::vector<std::string> sdxl_diffusers = {"down_blocks.1.attentions.0.proj_in.weight"};
  EXPECT_EQ(detect_architecture(sdxl_diffusers).architecture, Architecture::kUNet);
  const std::vector<std::string> sd3 = {"model.diffusion_model.joint_blocks.0.context_block.attn.qkv.weight"};
  EXPECT_EQ(detect_architecture(sd3).architecture, Architecture::kMMDiT);
  const std::vector<std::string> flux = {"double_blocks.0.img_attn.qkv.weight", "single_blocks.0.linear1.weight"};
  EXPECT_EQ(detect_architecture(flux).architecture, Architecture::kMMDiT);
  const std::vector<std::string> qwen = {"transformer_blocks.0.attn.to_q.weight",
                                          "transformer_blocks.0.txt_mlp.net.0.proj.weight"};
  const auto q = detect_architecture(qwen);
  EXPECT_EQ(q.architecture, Architecture::kMMDiT);
  EXPECT_NE(q.evidence.find("txt_mlp"), std::string::npos);
  // A plain transformer without a context stream (e.g. a text encoder) is not MMDiT.
  const std::vector<std::string> plain = {"transformer_blocks.0.attn1.to_q.weight"};
  EXPECT_EQ(detect_architecture(plain).architecture, Architecture::kUnknown);
  const std::vector<ParameterKey> wan = {{"patch_embedding.weight", {5120, 16, 1, 2, 2}},
                                         {"blocks.0.self_attn.q.weight", {5120, 5120}}};
  const auto w = detect_architecture(wan);
  EXPECT_EQ(w.architecture, Architecture::kVideoDiT);
  EXPECT_NE(w.evidence.find("3-D"), std::string::npos);
  // A 2-D patch embedding (image DiT) is not a video DiT.
  const std::vector<ParameterKey> image_dit = {{"patch_embedding.weight", {1152, 4, 2, 2}},
                                               {"blocks.0.self_attn.q.weight", {1152, 1152}}};
  EXPECT_EQ(detect_architecture(image_dit).architecture, Architecture::kUnknown);
  EXPECT_EQ(parse_architecture("video_dit"), Architecture::kVideoDiT);
  EXPECT_EQ(to_string(Architecture::kUNet), "UNet");
}

TEST(Architecture, RunWithoutDeclaredArchitectureUsesModelSnapshot) {
  genscope::Run run = make_run(kSec, "");
  run.steps[0].attachments.push_back(
      {"model_snapshot", "unet",
       {{"parameters", {{{"name", "input_blocks.0.0.weight"}, {"shape", {320, 4, 3, 3}}}}}}});
  EXPECT_EQ(validate(run, {}).architecture, Architecture::kUNet);
}

// --- diagnostics ------------------------------------------------------------------------

TEST(Diagnostics, MemoryHeadroomUsesTotalFromStepMetrics) {
  genscope::Run run = make_run(kSec);
  run.steps[1].metrics[0].peak = 75e9;  // of 80 GB: 6.25% headroom
  const auto list = diagnose(run, false);
  const auto& d = find_diagnostic(list, "memory_headroom_low");
  EXPECT_EQ(d.step, "sampling");
  EXPECT_NEAR(d.evidence["headroom_percent"].get<double>(), 6.25, 1e-9);
  run.steps[1].metrics[0].peak = 70e9;  // 12.5%: fine
  for (const auto& x : diagnose(run, false)) EXPECT_NE(x.id, "memory_headroom_low");
}

TEST(Diagnostics, SlowFirstIterationAndVariance) {
  genscope::Run run = make_run(kSec);
  run.steps[1].iteration_ns[0] = 10 * (kSec / 20);
  const auto first = find_diagnostic(diagnose(run, false), "slow_first_iteration");
  EXPECT_NEAR(first.evidence["ratio"].get<double>(), 10, 1e-9);
  for (const auto& x : diagnose(run, false)) EXPECT_NE(x.id, "high_iteration_variance");
  // Alternating 20 ms / 60 ms: CV ~ 0.5.
  for (std::size_t i = 1; i < run.steps[1].iteration_ns.size(); ++i)
    run.steps[1].iteration_ns[i] = i % 2 ? 20'000'000 : 60'000'000;
  const auto var = find_diagnostic(diagnose(run, false), "high_iteration_variance");
  EXPECT_GT(var.evidence["cv"].get<double>(), 0.25);
}

TEST(Diagnostics, FallbackNonFiniteAndUtilization) {
  genscope::Run run = make_run(kSec);
  run.steps[2].attempts = {{"direct", StepStatus::kFailed, "CUDA out of memory", 100},
                           {"tiled", StepStatus::kOk, "", 200}};
  run.steps[2].attachments.push_back(
      {"tensor", "image", {{"stats", {{"float", {{"nan_count", 3}, {"pos_inf_count", 1}}}}}}});
  run.attachments.push_back({"tensor", "clean", {{"stats", {{"nan_count", 0}}}}});
  run.attachments.push_back({"tensor", "odd", {{"stats", "not an object"}}});
  // Utilisation series: 30% during sampling, 100% outside.
  run.series.metrics = {"gpu0.utilization_percent"};
  for (int i = 0; i < 30; ++i) {
    run.series.offset_ns.push_back(i * 100'000'000LL);
    const bool in_sampling = i * 100'000'000LL >= kSec && i * 100'000'000LL <= 2 * kSec;
    run.series.values.push_back(in_sampling ? 30 : 100);
  }
  const auto list = diagnose(run, false);
  const auto& f = find_diagnostic(list, "fallback_used");
  EXPECT_EQ(f.evidence["final_strategy"], "tiled");
  EXPECT_EQ(f.evidence["attempts"][0]["error"], "CUDA out of memory");
  const auto& n = find_diagnostic(list, "non_finite_output");
  EXPECT_EQ(n.step, "decode");
  EXPECT_EQ(n.evidence["nan_count"].get<double>(), 3);
  EXPECT_EQ(n.evidence["pos_inf_count"].get<double>(), 1);
  int non_finite = 0;
  for (const auto& d : list) non_finite += d.id == "non_finite_output";
  EXPECT_EQ(non_finite, 1);
  const auto& u = find_diagnostic(list, "low_gpu_utilization");
  EXPECT_NEAR(u.evidence["mean_percent"].get<double>(), 30, 1e-9);
  // VAE decode fallback gets the step-kind specific rule.
  const auto recs = recommend(Architecture::kUNet, run, list);
  bool vae_rule = false;
  for (const auto& r : recs)
    if (r.diagnostic == "fallback_used") vae_rule = r.text.find("VAE") != std::string::npos;
  EXPECT_TRUE(vae_rule);
}

// --- usage statistics -------------------------------------------------------------------

TEST(UsageStats, AccumulatesAcrossGenerations) {
  UsageTracker tracker;
  EXPECT_TRUE(std::isnan(tracker.stats().average_inference_ns));
  tracker.record_initialization(3 * kSec);
  tracker.record_generation(2 * kSec, 10e9, 8e9);
  tracker.record_generation(4 * kSec, 12e9, 9e9);
  tracker.set_device("NVIDIA H200");
  const UsageStats s = tracker.stats();
  EXPECT_EQ(s.generations, 2u);
  EXPECT_EQ(s.total_inference_ns, 6 * kSec);
  EXPECT_DOUBLE_EQ(s.average_inference_ns, 3e9);
  EXPECT_DOUBLE_EQ(s.peak_memory_bytes, 12e9);
  EXPECT_DOUBLE_EQ(s.current_memory_bytes, 9e9);
  const auto j = tracker.to_json();
  EXPECT_DOUBLE_EQ(j["initialization_seconds"].get<double>(), 3);
  EXPECT_DOUBLE_EQ(j["average_inference_seconds"].get<double>(), 3);
  EXPECT_EQ(j["device"], "NVIDIA H200");
}

TEST(UsageStats, RecordRunSplitsLoadingFromInference) {
  UsageTracker tracker;
  genscope::Run run = make_run(2 * kSec);
  run.gpus.push_back({0, "NVIDIA H200", "", "", 141e9});
  tracker.record_run(run);
  const UsageStats s = tracker.stats();
  EXPECT_EQ(s.initialization_ns, kSec);
  EXPECT_EQ(s.total_inference_ns, run.duration_ns - kSec);
  EXPECT_DOUBLE_EQ(s.peak_memory_bytes, 20e9);
  EXPECT_EQ(s.device, "NVIDIA H200");
}

// Every file in tests/fixtures/targets gives the error listed in expected_errors.json.
TEST(Targets, FixturesGiveTheirErrors) {
  const std::filesystem::path dir =
      std::filesystem::path(GENSCOPE_SOURCE_DIR) / "tests" / "fixtures" / "targets";
  std::ifstream in(dir / "expected_errors.json");
  const auto expected = nlohmann::json::parse(in);
  std::size_t checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name == "expected_errors.json") continue;
    ASSERT_TRUE(expected.contains(name)) << name << " has no expected error";
    std::string got = "ok";
    try {
      read_targets_file(entry.path(), "wan");
    } catch (const Error& e) {
      got = e.name();
    }
    EXPECT_EQ(got, expected[name].get<std::string>()) << name;
    ++checked;
  }
  EXPECT_EQ(checked, expected.size());
}

}  // namespace
}  // namespace genscope
