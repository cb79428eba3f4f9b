// Export benchmarks: rendering a 10-step run with 100k samples as HTML, Chrome trace and CSV,
// each next to its peer measured in the same binary: reading the run document itself
// (read_run_file of the same run: file read, JSON parse, Run value) and serialising it
// (to_json + dump). Counters give each output's size next to the run document's.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>

#include "genscope/chrome_trace.hpp"
#include "genscope/csv_export.hpp"
#include "genscope/html_report.hpp"
#include "genscope/run_json.hpp"

namespace {

namespace fs = std::filesystem;
using namespace genscope;

// 10 steps (one nested, one sampling step with 30 iterations, one with a fallback chain),
// 100k samples of 5 metrics at 10 ms with noise and spikes (so downsampling has work to do).
Run make_run() {
  Run run;
  run.id = "0123456789abcdef0123456789abcdef";
  run.start_utc = "2026-11-21T12:00:00.000Z";
  run.pipeline = {"bench", "sdxl", "UNet", {{"steps", "30"}}};
  run.host = {"host", "CPU", 8, 64e9, "Linux"};
  run.gpus.push_back({0, "NVIDIA H200", "GPU-0", "560", 141e9});
  const std::int64_t total = 100'000LL * 10'000'000;  // 1000 s
  for (int s = 0; s < 10; ++s) {
    StepRecord step;
    step.id = s;
    step.parent_id = s == 2 ? 1 : -1;
    step.name = "step " + std::to_string(s);
    step.kind = s == 5 ? StepKind::kSampling : StepKind::kCustom;
    step.status = StepStatus::kOk;
    step.start_offset_ns = s == 2 ? total / 10 + 1'000'000 : total / 10 * s;
    step.duration_ns = s == 2 ? total / 20 : total / 10 - 1'000;
    for (const char* name : {"process.rss_bytes", "system.used_bytes", "gpu0.used_bytes"}) {
      step.metrics.push_back({name, Unit::kBytes, 1e9, 3e9, 2e9, step.duration_ns / 2, "exact"});
    }
    if (s == 5) {
      for (int i = 0; i < 30; ++i) step.iteration_ns.push_back(step.duration_ns / 31);
    }
    if (s == 7) {
      step.attempts = {{"direct", StepStatus::kFailed, "OOM", step.duration_ns / 4},
                       {"tiled", StepStatus::kOk, "", step.duration_ns / 2}};
    }
    run.steps.push_back(step);
  }
  run.duration_ns = total;
  run.series.metrics = {"process.rss_bytes", "system.used_bytes", "gpu0.used_bytes",
                        "gpu0.utilization_percent", "system.used_percent"};
  run.series.units = {Unit::kBytes, Unit::kBytes, Unit::kBytes, Unit::kPercent, Unit::kPercent};
  run.series.interval_ns = 10'000'000;
  run.series.samples_taken = 100'000;
  run.series.capacity = 100'000;
  std::uint64_t noise = 88172645463325252ULL;
  for (std::size_t i = 0; i < 100'000; ++i) {
    noise ^= noise << 13, noise ^= noise >> 7, noise ^= noise << 17;  // xorshift64
    const double jitter = static_cast<double>(noise % 1'000'000);
    run.series.offset_ns.push_back(static_cast<std::int64_t>(i) * 10'000'000);
    run.series.values.push_back(1e9 + jitter * 512 + (i % 9973 == 0 ? 5e8 : 0));
    run.series.values.push_back(3e10 + jitter * 4096);
    run.series.values.push_back(2e10 + static_cast<double>(i) * 8192 + jitter);
    run.series.values.push_back(static_cast<double>(noise % 100));
    run.series.values.push_back(40 + static_cast<double>(noise % 1000) / 100);
  }
  return run;
}

const Run& bench_run() {
  static const Run run = make_run();
  return run;
}

fs::path run_file() {
  static const fs::path path = [] {
    const fs::path dir =
        fs::temp_directory_path() / ("genscope_report_bench_" + std::to_string(getuid()));
    fs::create_directories(dir);
    write_run_file(bench_run(), dir / "run.json");
    return dir / "run.json";
  }();
  return path;
}

void BM_ReadRunDocument(benchmark::State& state) {
  const fs::path path = run_file();
  for (auto _ : state) {
    const Run run = read_run_file(path);
    benchmark::DoNotOptimize(run.series.values.data());
  }
  state.counters["document_bytes"] = static_cast<double>(fs::file_size(path));
}
BENCHMARK(BM_ReadRunDocument)->Unit(benchmark::kMillisecond);

void BM_SerializeRunDocument(benchmark::State& state) {
  const Run& run = bench_run();
  std::size_t bytes = 0;
  for (auto _ : state) {
    const std::string doc = to_json(run).dump(1);
    bytes = doc.size();
    benchmark::DoNotOptimize(doc.data());
  }
  state.counters["output_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_SerializeRunDocument)->Unit(benchmark::kMillisecond);

void BM_RenderHtml(benchmark::State& state) {
  const Run& run = bench_run();
  std::size_t bytes = 0;
  for (auto _ : state) {
    const std::string html = render_html_report(run);
    bytes = html.size();
    benchmark::DoNotOptimize(html.data());
  }
  state.counters["output_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_RenderHtml)->Unit(benchmark::kMillisecond);

void BM_RenderChromeTrace(benchmark::State& state) {
  const Run& run = bench_run();
  std::size_t bytes = 0;
  for (auto _ : state) {
    const std::string trace = render_chrome_trace(run);
    bytes = trace.size();
    benchmark::DoNotOptimize(trace.data());
  }
  state.counters["output_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_RenderChromeTrace)->Unit(benchmark::kMillisecond);

void BM_RenderCsv(benchmark::State& state) {
  const std::span<const Run> runs(&bench_run(), 1);
  std::size_t bytes = 0;
  for (auto _ : state) {
    const std::string steps = render_steps_csv(runs);
    const std::string series = render_series_csv(runs);
    bytes = steps.size() + series.size();
    benchmark::DoNotOptimize(series.data());
  }
  state.counters["output_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_RenderCsv)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
