// Console report benchmarks: render_console of a 10-step run with 100k samples (every step
// with an exact RSS peak that has no time of its own, so the report searches the series for
// the highest sample; a tensor and a text attachment per step), default and --verbose.
// Peers measured in the same binary: reading the same run document (read_run_file: read +
// JSON parse + Run), and the same render with the series emptied (what the sampled-time
// lookup costs).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "genscope/report.hpp"
#include "genscope/run_json.hpp"
#include "genscope/tensor_analysis.hpp"
#include "genscope/text_analysis.hpp"

namespace {

namespace fs = std::filesystem;
using namespace genscope;

constexpr std::size_t kSamples = 100'000;

Run make_run() {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> rss(1e9, 2e9);
  Run run;
  run.id = "0123456789abcdef0123456789abcdef";
  run.start_utc = "2026-11-21T12:00:00.000Z";
  run.pipeline = {"t2i", "sdxl", "UNet", {{"steps", "20"}}};
  run.host = {"host", "CPU", 2, 24e9, "Linux"};
  run.probes = {"process", "system"};
  const std::vector<std::string> metrics = {"process.rss_bytes", "system.total_bytes",
                                            "system.available_bytes", "system.used_bytes",
                                            "system.used_percent"};
  static const std::vector<float> latent(4 * 64 * 64, 0.5f);
  const TensorView view{latent.data(), {1, 4, 64, 64}, {}, DType::kF32, "cpu"};
  const nlohmann::json tensor = tensor_analysis_json(view, TensorRole::kLatent);
  const nlohmann::json text = text_analysis_json(analyze_text("a photo of an astronaut", {.tokens = 8}));
  const std::int64_t step_ns = 1'000'000'000;
  for (int s = 0; s < 10; ++s) {
    StepRecord step;
    step.id = s;
    step.name = "step" + std::to_string(s);
    step.kind = s == 5 ? StepKind::kSampling : StepKind::kCustom;
    step.status = StepStatus::kOk;
    step.start_offset_ns = s * step_ns;
    step.duration_ns = step_ns;
    for (const std::string& name : metrics) {
      MetricFigures m;
      m.name = name;
      m.unit = name.ends_with("percent") ? Unit::kPercent : Unit::kBytes;
      m.before = 1e9;
      m.after = 1.5e9;
      m.peak = 2.5e9;
      m.peak_offset_ns = name == "process.rss_bytes" ? -1 : 1000;  // VmHWM: no time
      m.peak_source = name == "process.rss_bytes" ? "exact" : "sampled";
      step.metrics.push_back(m);
    }
    if (s == 5)
      for (int i = 0; i < 20; ++i) step.iteration_ns.push_back(step_ns / 20);
    step.attachments.push_back({"tensor", "latent", tensor});
    step.attachments.push_back({"text", "prompt", text});
    run.steps.push_back(step);
  }
  run.duration_ns = 10 * step_ns;
  run.series.metrics = metrics;
  run.series.units = {Unit::kBytes, Unit::kBytes, Unit::kBytes, Unit::kBytes, Unit::kPercent};
  run.series.interval_ns = 100'000;
  run.series.samples_taken = kSamples;
  run.series.capacity = kSamples;
  for (std::size_t i = 0; i < kSamples; ++i) {
    run.series.offset_ns.push_back(static_cast<std::int64_t>(i) * 100'000);
    for (std::size_t m = 0; m < metrics.size(); ++m) run.series.values.push_back(rss(rng));
  }
  return run;
}

const Run& bench_run() {
  static const Run run = make_run();
  return run;
}

void BM_RenderConsole(benchmark::State& state) {
  const Run& run = bench_run();
  std::size_t bytes = 0;
  for (auto _ : state) {
    std::string text = render_console(run, {.verbose = state.range(0) != 0});
    bytes = text.size();
    benchmark::DoNotOptimize(text);
  }
  state.counters["output_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_RenderConsole)->ArgName("verbose")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// Peer: the same render without the series (no sampled-time lookup).
void BM_RenderConsoleNoSeries(benchmark::State& state) {
  Run run = bench_run();
  run.series = TimeSeries{};
  for (auto _ : state) {
    std::string text = render_console(run);
    benchmark::DoNotOptimize(text);
  }
}
BENCHMARK(BM_RenderConsoleNoSeries)->Unit(benchmark::kMillisecond);

// Peer: reading the run document the report is rendered from.
void BM_ReadRunDocument(benchmark::State& state) {
  const fs::path path =
      fs::temp_directory_path() / ("genscope_console_bench_" + std::to_string(getpid()) + ".json");
  write_run_file(bench_run(), path);
  for (auto _ : state) {
    Run run = read_run_file(path);
    benchmark::DoNotOptimize(run);
  }
  state.counters["document_bytes"] = static_cast<double>(fs::file_size(path));
  fs::remove(path);
}
BENCHMARK(BM_ReadRunDocument)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
