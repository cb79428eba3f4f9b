// Tests of the perf module: targets, score formula, architecture detection, diagnostics,
// rules, statistics on known distributions, comparisons and regression detection.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>

#include "genscope/compare.hpp"
#include "genscope/error.hpp"
#include "genscope/regression.hpp"
#include "genscope/statistics.hpp"
#include "genscope/targets.hpp"
#include "genscope/usage_stats.hpp"
#include "genscope/validation.hpp"

namespace genscope {
namespace {

constexpr std::int64_t kSec = 1'000'000'000;

StepRecord make_step(int id, std::string name, StepKind kind, std::int64_t start_ns,
                     std::int64_t duration_ns) {
  StepRecord s;
  s.id = id;
  s.name = std::move(name);
  s.kind = kind;
  s.status = StepStatus::kOk;
  s.start_offset_ns = start_ns;
  s.duration_ns = duration_ns;
  return s;
}

MetricFigures figure(std::string name, double before, double peak, double after) {
  MetricFigures m;
  m.name = std::move(name);
  m.before = before;
  m.peak = peak;
  m.after = after;
  return m;
}

// A 3-step run: loading 1 s, sampling `sampling_ns` (20 equal iterations), decode 0.5 s.
genscope::Run make_run(std::int64_t sampling_ns, std::string architecture = "MMDiT") {
  genscope::Run run;
  run.id = "run";
  run.pipeline.name = "qwen-image";
  run.pipeline.architecture = std::move(architecture);
  run.steps.push_back(make_step(0, "load", StepKind::kModelLoading, 0, kSec));
  auto sampling = make_step(1, "sampling", StepKind::kSampling, kSec, sampling_ns);
  for (int i = 0; i < 20; ++i) sampling.iteration_ns.push_back(sampling_ns / 20);
  sampling.metrics.push_back(figure("gpu0.used_bytes", 10e9, 20e9, 12e9));
  sampling.metrics.push_back(figure("gpu0.total_bytes", 80e9, 80e9, 80e9));
  run.steps.push_back(sampling);
  run.steps.push_back(make_step(2, "decode", StepKind::kVaeDecode, kSec + sampling_ns, kSec / 2));
  run.duration_ns = kSec + sampling_ns + kSec / 2;
  return run;
}

bool has_diagnostic(const Validation& v, const std::string& id) {
  for (const auto& d : v.diagnostics)
    if (d.id == id) return true;
  return false;
}

const Diagnostic& find_diagnostic(const std::vector<Diagnostic>& list, const std::string& id) {
  for (const auto& d : list)
    if (d.id == id) return d;
  throw std::runtime_error("diagnostic not found: " + id);
}

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

// --- statistics -------------------------------------------------------------------------

TEST(Statistics, MedianMadAndMannWhitneyKnownValues) {
  const std::vector<double> v = {1, 2, 3, 4, 100};
  EXPECT_DOUBLE_EQ(median(v), 3);
  EXPECT_DOUBLE_EQ(median_absolute_deviation(v), 1);
  const std::vector<double> even = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(median(even), 2.5);
  // Complete separation 5 vs 5: exact two-sided p = 2 / C(10,5) = 2/252.
  const std::vector<double> a = {1, 2, 3, 4, 5}, b = {6, 7, 8, 9, 10};
  const auto r = mann_whitney_u(a, b);
  EXPECT_DOUBLE_EQ(r.u, 0);
  EXPECT_NEAR(r.p_value, 2.0 / 252, 1e-12);
  // Same values: no evidence of a difference.
  EXPECT_NEAR(mann_whitney_u(a, a).p_value, 1, 1e-12);
  // Large samples with ties use the normal approximation (compare with scipy's value
  // for this input: U = 0, p = 1.2e-8 with tie + continuity correction).
  std::vector<double> x(30, 1.0), y(30, 2.0);
  for (int i = 0; i < 30; ++i) x[i] += i % 3, y[i] += 3 + i % 3;
  const auto big = mann_whitney_u(x, y);
  EXPECT_DOUBLE_EQ(big.u, 0);
  EXPECT_LT(big.p_value, 1e-8);
}

TEST(Statistics, BootstrapIntervalCoversTrueRatio) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> before(100, 2), after(80, 2);
  std::vector<double> a, b;
  for (int i = 0; i < 15; ++i) a.push_back(before(rng)), b.push_back(after(rng));
  const Interval ci = bootstrap_median_ratio(a, b);
  EXPECT_LT(ci.low, 0.8);
  EXPECT_GT(ci.high, 0.8);
  EXPECT_LT(ci.high, 0.85);
}

// Pure noise (2% jitter) must never give a verdict; a real 20% slowdown must.
TEST(Statistics, NoFalseVerdictOnNoiseAndSlowdownDetected) {
  std::mt19937_64 rng(12345);
  std::normal_distribution<double> jitter(1.0, 0.02);
  CompareOptions options;
  int false_verdicts = 0, detected = 0;
  for (int trial = 0; trial < 1000; ++trial) {
    std::vector<genscope::Run> before, after, slower;
    for (int i = 0; i < 5; ++i) {
      before.push_back(make_run(static_cast<std::int64_t>(4e9 * jitter(rng))));
      after.push_back(make_run(static_cast<std::int64_t>(4e9 * jitter(rng))));
      slower.push_back(make_run(static_cast<std::int64_t>(4.8e9 * jitter(rng))));
    }
    const auto same = compare_groups(before, after, nullptr, options);
    for (const auto& s : same.steps)
      if (s.step == "sampling" && s.verdict != "unchanged") ++false_verdicts;
    if (trial % 10 == 0) {
      const auto slow = compare_groups(before, slower, nullptr, options);
      for (const auto& s : slow.steps)
        if (s.step == "sampling" && s.verdict == "slower") ++detected;
    }
  }
  EXPECT_EQ(false_verdicts, 0);
  EXPECT_EQ(detected, 100);
}

TEST(Compare, SingleRunsSeedFigures) {
  genscope::Run before = make_run(int64_t(14.5 * kSec));  // 16 s total
  genscope::Run after = make_run(int64_t(0.9 * kSec));    // 2.4 s total
  after.steps[1].metrics[0].peak = 15e9;
  before.id = "A";
  after.id = "B";
  const Targets t = Targets::defaults();
  const RunComparison c = compare_runs(before, after, &t);
  ASSERT_EQ(c.steps.front().step, "(run)");
  const auto& total = c.steps.front();
  EXPECT_NEAR(total.improvement_percent, 85, 1e-9);
  EXPECT_NEAR(total.factor, 16 / 2.4, 1e-9);
  EXPECT_TRUE(total.significant);
  EXPECT_EQ(total.verdict, "faster");
  EXPECT_TRUE(std::isnan(total.p_value));
  EXPECT_NEAR(c.before_score, 31.25, 1e-9);
  EXPECT_DOUBLE_EQ(c.after_score, 100);
  EXPECT_FALSE(c.before_met);
  EXPECT_TRUE(c.after_met);
  const auto& sampling = c.steps[2];
  EXPECT_EQ(sampling.step, "sampling");
  EXPECT_DOUBLE_EQ(sampling.memory_change_bytes, -5e9);
  // The load step did not change.
  EXPECT_EQ(c.steps[1].verdict, "unchanged");
  EXPECT_FALSE(c.steps[1].significant);
  const auto j = to_json(c);
  EXPECT_EQ(j["steps"][0]["verdict"], "faster");
  EXPECT_NE(render_comparison(c).find("significant"), std::string::npos);
}

TEST(Compare, StepOnlyOnOneSideIsMissing) {
  genscope::Run before = make_run(kSec), after = make_run(kSec);
  after.steps.push_back(make_step(3, "upscale", StepKind::kCustom, 0, kSec));
  const auto c = compare_runs(before, after);
  bool found = false;
  for (const auto& s : c.steps)
    if (s.step == "upscale") found = s.verdict == "missing";
  EXPECT_TRUE(found);
}

// --- regressions ------------------------------------------------------------------------

std::vector<Observation> series(std::mt19937_64& rng, int n, double last_factor) {
  std::normal_distribution<double> jitter(1.0, 0.02);
  std::vector<Observation> out;
  for (int i = 0; i < n; ++i) {
    const double f = i == n - 1 ? last_factor : 1.0;
    out.push_back({"p", "sampling", i * kSec, 4e9 * f * jitter(rng), "r" + std::to_string(i)});
  }
  return out;
}

TEST(Regression, NoFalseRegressionOnNoiseAndSlowdownDetected) {
  std::mt19937_64 rng(99);
  int false_regressions = 0, detected = 0;
  for (int trial = 0; trial < 1000; ++trial) {
    const auto noise = series(rng, 21, 1.0);
    for (const auto& f : find_regressions(noise)) false_regressions += f.regression;
    const auto slow = series(rng, 21, 1.2);
    const auto findings = find_regressions(slow);
    ASSERT_EQ(findings.size(), 1u);
    detected += findings[0].regression;
    if (trial == 0) {
      EXPECT_EQ(findings[0].latest_run_ids, std::vector<std::string>{"r20"});
      EXPECT_EQ(findings[0].baseline_runs, 20u);
      EXPECT_NEAR(findings[0].change_percent, 20, 8);
    }
  }
  EXPECT_EQ(false_regressions, 0);
  EXPECT_EQ(detected, 1000);
}

TEST(Regression, WindowPipelineFilterAndTooFewRuns) {
  std::mt19937_64 rng(5);
  auto obs = series(rng, 4, 2.0);  // 3 baseline runs < min_baseline
  EXPECT_TRUE(find_regressions(obs).empty());
  auto more = series(rng, 30, 1.0);
  // An old slow period outside the window must not matter: only the last 10 are baseline.
  for (int i = 0; i < 15; ++i) more[i].duration_ns *= 3;
  RegressionOptions options;
  options.window = 10;
  EXPECT_FALSE(find_regressions(more, options)[0].regression);
  options.pipeline = "other";
  EXPECT_TRUE(find_regressions(more, options).empty());
  // A speed-up is never a regression.
  auto faster = series(rng, 21, 0.5);
  EXPECT_FALSE(find_regressions(faster)[0].regression);
  EXPECT_EQ(to_json(find_regressions(faster))[0]["regression"], false);
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

}  // namespace
}  // namespace genscope
