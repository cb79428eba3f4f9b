// analyze_tensor through a real Step: the attachment, tensor dumps (NumPy reads them back),
// dump selection by role and step kind, and a failing dump that loses nothing else.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "genscope/genscope.hpp"
#include "genscope/npy.hpp"
#include "genscope/tensor_analysis.hpp"

namespace genscope {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  const char* base = std::getenv("GENSCOPE_TEST_TMP");
  fs::path dir = fs::path(base ? base : "/tmp") / "step_analysis_test" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

MonitorOptions quiet() {
  MonitorOptions o;
  o.process_probe = o.system_probe = o.nvml_probe = o.sampler = false;
  return o;
}

struct Data {
  std::vector<float> cond = std::vector<float>(77 * 768);
  std::vector<float> latent = std::vector<float>(4 * 8 * 8, 0.5f);
  TensorView cond_view{cond.data(), {1, 77, 768}, {}, DType::kF32, "cpu"};
  TensorView latent_view{latent.data(), {1, 4, 8, 8}, {}, DType::kF32, "cpu"};
  Data() {
    for (std::size_t i = 0; i < cond.size(); ++i) cond[i] = static_cast<float>(i % 97) / 97.0f;
  }
};

TEST(AnalyzeTensor, AttachesAndDumpsNpyThatNumpyReads) {
  const fs::path dir = scratch("npy");
  Data d;
  Monitor monitor(quiet());
  ActiveRun run = monitor.start_run({.dumps = {.directory = dir}});
  {
    Step step = run.step(StepKind::kTextEncoding, "encode prompt");
    analyze_tensor(step, "positive", d.cond_view, TensorRole::kConditioning,
                   {.declared_family = ModelFamily::kSD1});
  }
  const genscope::Run r = run.finish();
  ASSERT_EQ(r.steps[0].attachments.size(), 1u);
  const Attachment& a = r.steps[0].attachments[0];
  EXPECT_EQ(a.type, "tensor");
  EXPECT_EQ(a.data["classification"]["family"], "SD1.x");
  const fs::path file = dir / "00_encode_prompt" / "positive.npy";
  EXPECT_EQ(a.data["dump"]["path"], file.string());
  ASSERT_TRUE(fs::exists(file));
  const std::string cmd = std::string(GENSCOPE_PYTHON) +
                          " -c \"import numpy as n; a = n.load('" + file.string() +
                          "'); assert a.shape == (1, 77, 768) and a.dtype == n.float32; "
                          "assert abs(float(a[0, 1, 0]) - 768 % 97 / 97) < 1e-6\"";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  const std::string report = render_console(r, {.plain = true});
  EXPECT_NE(report.find("TENSOR \"positive\" (conditioning)"), std::string::npos);
  EXPECT_NE(report.find("Model family: SD1.x"), std::string::npos);
}

TEST(AnalyzeTensor, SafetensorsDumpCarriesTheAnalysis) {
  const fs::path dir = scratch("st");
  Data d;
  Monitor monitor(quiet());
  ActiveRun run = monitor.start_run({.dumps = {.directory = dir, .safetensors = true}});
  {
    Step step = run.step(StepKind::kLatentGeneration, "init latents");
    analyze_tensor(step, "latent", d.latent_view, TensorRole::kLatent);
  }
  const genscope::Run r = run.finish();
  const SafetensorsFile f = SafetensorsFile::open(dir / "00_init_latents" / "latent.safetensors");
  EXPECT_EQ(f.metadata().at("genscope.run_id"), r.id);
  EXPECT_EQ(f.metadata().at("genscope.step"), "init latents");
  const auto analysis = nlohmann::json::parse(f.metadata().at("genscope.analysis"));
  EXPECT_EQ(analysis["shape"], nlohmann::json({1, 4, 8, 8}));
}

TEST(AnalyzeTensor, DumpSelectionByRoleAndKind) {
  const fs::path dir = scratch("select");
  Data d;
  Monitor monitor(quiet());
  ActiveRun run = monitor.start_run(
      {.dumps = {.directory = dir, .roles = {"latent"}, .kinds = {StepKind::kSampling}}});
  {
    Step step = run.step(StepKind::kSampling, "denoise");
    analyze_tensor(step, "cond", d.cond_view, TensorRole::kConditioning);  // role not selected
    analyze_tensor(step, "x", d.latent_view, TensorRole::kLatent);
  }
  {
    Step step = run.step(StepKind::kVaeDecode, "decode");  // kind not selected
    analyze_tensor(step, "x", d.latent_view, TensorRole::kLatent);
  }
  run.finish();
  EXPECT_TRUE(fs::exists(dir / "00_denoise" / "x.npy"));
  EXPECT_FALSE(fs::exists(dir / "00_denoise" / "cond.npy"));
  EXPECT_FALSE(fs::exists(dir / "01_decode"));
}

TEST(AnalyzeTensor, FailedDumpKeepsTheAnalysisAndRecordsTheError) {
  Data d;
  Monitor monitor(quiet());
  ActiveRun run = monitor.start_run({.dumps = {.directory = "/proc/genscope-cannot-write"}});
  {
    Step step = run.step(StepKind::kSampling, "denoise");
    analyze_tensor(step, "x", d.latent_view, TensorRole::kLatent);
  }
  const genscope::Run r = run.finish();
  ASSERT_EQ(r.steps[0].attachments.size(), 1u);
  EXPECT_FALSE(r.steps[0].attachments[0].data.contains("dump"));
  ASSERT_EQ(r.monitoring_errors.size(), 1u);
  EXPECT_EQ(r.monitoring_errors[0].source, "tensor_dump");
}

TEST(AnalyzeTensor, InvalidViewIsRecordedNotThrown) {
  Monitor monitor(quiet());
  ActiveRun run = monitor.start_run();
  {
    Step step = run.step(StepKind::kSampling, "denoise");
    analyze_tensor(step, "null", TensorView{nullptr, {4}, {}, DType::kF32, "cpu"},
                   TensorRole::kLatent);
  }
  const genscope::Run r = run.finish();
  EXPECT_TRUE(r.steps[0].attachments.empty());
  ASSERT_EQ(r.monitoring_errors.size(), 1u);
  EXPECT_EQ(r.monitoring_errors[0].source, "tensor_analysis");
}

}  // namespace
}  // namespace genscope
