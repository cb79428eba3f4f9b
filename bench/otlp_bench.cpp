// OpenTelemetry export benchmarks (docs/performance.md "OpenTelemetry").
// Encoding a large finished run as the OTLP trace and metrics requests (what submit() does on
// the dispatcher thread before the exporter's thread posts them), next to the peer: writing
// the same run's JSON document (write_run_file, what every `genscope run --out` does).
// The run: 200 steps (nested two deep) with 6 figures each, one sampling step of 1,000
// iterations, a tensor attachment per 10 steps, 100k samples of 15 columns.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>

#include "genscope/otlp.hpp"
#include "genscope/run_json.hpp"

namespace {

using namespace genscope;

const Run& big_run() {
  static const Run run = [] {
    Run r;
    r.id = "0123456789abcdef0123456789abcdef";
    r.start_unix_ns = 1'800'000'000'000'000'000;
    r.start_utc = "2027-01-15T08:00:00Z";
    r.pipeline = {"t2i", "sdxl", "UNet", {{"steps", "1000"}}};
    r.host.hostname = "host";
    r.labels["team"] = "imaging";
    r.gpus.push_back({0, "NVIDIA H200", "GPU-0", "560", 141e9});
    std::int64_t t = 0;
    for (int s = 0; s < 200; ++s) {
      StepRecord step;
      step.id = s;
      step.parent_id = s % 10 == 0 ? -1 : s - s % 10;
      step.name = "step " + std::to_string(s);
      step.kind = s == 5 ? StepKind::kSampling : static_cast<StepKind>(s % 8);
      step.start_offset_ns = t;
      step.duration_ns = 10'000'000;
      t += 10'000'000;
      for (const char* name :
           {"process.rss_bytes", "gpu0.used_bytes", "system.used_bytes", "torch.allocated_bytes",
            "torch.reserved_bytes", "cgroup.usage_bytes"}) {
        step.metrics.push_back({name, Unit::kBytes, 1e9, 1.5e9, 2e9, 1000, "exact"});
      }
      step.counters["frames"] = 16;
      if (s == 5) {
        for (int i = 0; i < 1000; ++i) step.iteration_ns.push_back(10'000);
      }
      if (s % 10 == 0) {
        step.attachments.push_back(
            {"tensor", "latent",
             nlohmann::json{
                 {"shape", {1, 4, 128, 128}},
                 {"dtype", "F16"},
                 {"stats", {{"min", -3.0}, {"max", 3.0}, {"mean", 0.0}, {"nan_count", 0}}}}});
      }
      r.steps.push_back(std::move(step));
    }
    r.duration_ns = t;
    for (int c = 0; c < 15; ++c) {
      r.series.metrics.push_back("column" + std::to_string(c));
      r.series.units.push_back(Unit::kBytes);
    }
    for (int i = 0; i < 100'000; ++i) {
      r.series.offset_ns.push_back(static_cast<std::int64_t>(i) * 20'000);
      for (int c = 0; c < 15; ++c) r.series.values.push_back(1e9 + i * 1000.0 + c);
    }
    return r;
  }();
  return run;
}

void BM_OtlpEncodeTraceAndMetrics(benchmark::State& state) {
  const Run& run = big_run();
  std::size_t bytes = 0;
  for (auto _ : state) {
    const std::string traces = encode_otlp_traces(run);
    const std::string metrics = encode_otlp_metrics(run);
    bytes = traces.size() + metrics.size();
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["request_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_OtlpEncodeTraceAndMetrics)->Unit(benchmark::kMillisecond);

void BM_WriteRunJson(benchmark::State& state) {
  const Run& run = big_run();
  const auto path = std::filesystem::temp_directory_path() /
                    ("genscope-otlp-bench-" + std::to_string(::getpid()) + ".json");
  for (auto _ : state) write_run_file(run, path);
  state.counters["document_bytes"] = static_cast<double>(std::filesystem::file_size(path));
  std::filesystem::remove(path);
}
BENCHMARK(BM_WriteRunJson)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
