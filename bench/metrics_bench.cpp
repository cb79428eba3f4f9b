// Prometheus output benchmarks (docs/performance.md "Metrics").
// - Rendering a finished 10-step run with 100k samples as text 0.0.4 / OpenMetrics (time and
//   size), next to the peer: reading the same run document from disk (read_run_file).
// - What the live endpoint adds on the dispatcher thread per event (step end, sample,
//   iteration), next to the peer: copying the event's payload, which the queue already does.
// - A scrape: the copy made under the lock (the longest the dispatcher can wait for a scrape)
//   and the rendering outside it, next to the whole HTTP round trip on loopback.
#include <benchmark/benchmark.h>
#include <httplib.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "genscope/metrics.hpp"
#include "genscope/run_json.hpp"
#include "report/metrics_model.hpp"

namespace {

namespace fs = std::filesystem;
using namespace genscope;

StepRecord make_step(int s, std::int64_t start, std::int64_t duration) {
  StepRecord step;
  step.id = s;
  step.name = "step" + std::to_string(s);
  step.kind = s == 5 ? StepKind::kSampling : static_cast<StepKind>(s % 8);
  step.status = StepStatus::kOk;
  step.start_offset_ns = start;
  step.duration_ns = duration;
  for (const char* name : {"process.rss_bytes", "gpu0.used_bytes", "system.used_bytes"}) {
    MetricFigures m;
    m.name = name;
    m.before = 1e9;
    m.peak = 2e9;
    m.after = 1.5e9;
    m.peak_source = "sampled";
    step.metrics.push_back(m);
  }
  step.counters["frames"] = 16;
  if (s == 5) {
    for (int i = 0; i < 20; ++i) step.iteration_ns.push_back(duration / 20);
  }
  return step;
}

// 10 steps, 100k samples of 15 columns (process, system, one NVML GPU).
const Run& big_run() {
  static const Run run = [] {
    Run r;
    r.id = "bench";
    r.start_unix_ns = 1'700'000'000'000'000'000;
    r.start_utc = "2026-11-21T12:00:00Z";
    r.pipeline = {"t2i", "sdxl", "UNet", {{"steps", "20"}}};
    r.host.hostname = "host";
    r.gpus.push_back({0, "NVIDIA H200", "GPU-0", "560", 141e9});
    std::int64_t t = 0;
    for (int s = 0; s < 10; ++s) {
      const std::int64_t d = 100'000'000LL * (s + 1);
      r.steps.push_back(make_step(s, t, d));
      t += d;
    }
    r.duration_ns = t;
    r.series.metrics = {"process.rss_bytes",  "system.total_bytes",     "system.available_bytes",
                        "system.used_bytes",  "system.used_percent",     "gpu0.total_bytes",
                        "gpu0.used_bytes",    "gpu0.free_bytes",         "gpu0.reserved_bytes",
                        "gpu0.utilization_percent", "gpu0.memory_utilization_percent",
                        "gpu0.temperature_celsius", "gpu0.power_watts",  "gpu0.sm_clock_hertz",
                        "gpu0.memory_clock_hertz"};
    for (const std::string& m : r.series.metrics) {
      r.series.units.push_back(m.ends_with("_bytes")     ? Unit::kBytes
                               : m.ends_with("_percent") ? Unit::kPercent
                               : m.ends_with("_watts")   ? Unit::kWatts
                               : m.ends_with("_celsius") ? Unit::kCelsius
                                                         : Unit::kHertz);
    }
    const std::size_t n = 100'000;
    r.series.interval_ns = 10'000'000;
    r.series.samples_taken = n;
    r.series.capacity = n;
    std::mt19937_64 rng(1);
    std::uniform_real_distribution<double> u(0, 1);
    for (std::size_t i = 0; i < n; ++i) {
      r.series.offset_ns.push_back(static_cast<std::int64_t>(i) * 10'000'000);
      for (std::size_t c = 0; c < r.series.metrics.size(); ++c) r.series.values.push_back(1e9 * u(rng));
    }
    return r;
  }();
  return run;
}

fs::path run_document() {
  static const fs::path path = [] {
    const fs::path p = fs::temp_directory_path() / ("genscope_metrics_bench_" + std::to_string(getuid()) + ".json");
    write_run_file(big_run(), p);
    return p;
  }();
  return path;
}

void BM_ReadRunDocument(benchmark::State& state) {
  const fs::path path = run_document();
  for (auto _ : state) benchmark::DoNotOptimize(read_run_file(path));
  state.counters["file_MB"] = static_cast<double>(fs::file_size(path)) / 1e6;
}
BENCHMARK(BM_ReadRunDocument)->Unit(benchmark::kMillisecond);

void BM_RenderMetricsText(benchmark::State& state) {
  std::size_t bytes = 0;
  for (auto _ : state) {
    const std::string text = render_metrics(big_run(), MetricsFormat::kPrometheusText);
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  state.counters["output_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_RenderMetricsText)->Unit(benchmark::kMillisecond);

void BM_RenderMetricsOpenMetrics(benchmark::State& state) {
  std::size_t bytes = 0;
  for (auto _ : state) {
    const std::string text = render_metrics(big_run(), MetricsFormat::kOpenMetrics);
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  state.counters["output_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_RenderMetricsOpenMetrics)->Unit(benchmark::kMillisecond);

// The same run without its series: what the steps alone cost to render.
void BM_RenderMetricsStepsOnly(benchmark::State& state) {
  Run run = big_run();
  run.series.offset_ns.clear();
  run.series.values.clear();
  for (auto _ : state) benchmark::DoNotOptimize(render_metrics(run));
}
BENCHMARK(BM_RenderMetricsStepsOnly)->Unit(benchmark::kMicrosecond);

// --- the live sink, called as the dispatcher calls it -------------------------------------

std::shared_ptr<MetricsEndpoint> started_endpoint() {
  auto endpoint = std::make_shared<MetricsEndpoint>();
  Run started = big_run();
  started.steps.clear();
  started.series.offset_ns.clear();
  started.series.values.clear();
  endpoint->run_started(started);
  return endpoint;
}

void BM_SinkStepEnded(benchmark::State& state) {
  auto endpoint = started_endpoint();
  const StepRecord& step = big_run().steps[5];  // sampling: 3 figures, 20 iterations, a counter
  for (auto _ : state) endpoint->step_ended(step);
}
BENCHMARK(BM_SinkStepEnded);

void BM_CopyStepRecord(benchmark::State& state) {  // peer: the queue's copy of the event
  const StepRecord& step = big_run().steps[5];
  for (auto _ : state) {
    StepRecord copy = step;
    benchmark::DoNotOptimize(copy);
  }
}
BENCHMARK(BM_CopyStepRecord);

// A step without iterations opened and closed: the pair of events every step costs.
void BM_SinkStepBeganEnded(benchmark::State& state) {
  auto endpoint = started_endpoint();
  StepRecord step = big_run().steps[5];
  step.iteration_ns.clear();
  for (auto _ : state) {
    endpoint->step_began(step);
    endpoint->step_ended(step);
  }
}
BENCHMARK(BM_SinkStepBeganEnded);

void BM_SinkSample(benchmark::State& state) {
  auto endpoint = started_endpoint();
  const Run& run = big_run();
  const std::span<const double> row(run.series.values.data(), run.series.metrics.size());
  for (auto _ : state) endpoint->sample(0, row);
}
BENCHMARK(BM_SinkSample);

void BM_CopySampleRow(benchmark::State& state) {  // peer: the queue's copy of the row
  const Run& run = big_run();
  const std::span<const double> row(run.series.values.data(), run.series.metrics.size());
  for (auto _ : state) {
    std::vector<double> copy(row.begin(), row.end());
    benchmark::DoNotOptimize(copy.data());
  }
}
BENCHMARK(BM_CopySampleRow);

void BM_SinkIteration(benchmark::State& state) {
  auto endpoint = started_endpoint();
  StepRecord step = big_run().steps[5];
  endpoint->step_began(step);
  std::size_t i = 0;
  for (auto _ : state) endpoint->iteration(step.id, i++, 1'000'000);
}
BENCHMARK(BM_SinkIteration);

// --- a scrape -------------------------------------------------------------------------------

detail::MetricsModel scraped_model() {
  detail::MetricsModel model;
  model.run_started(big_run());
  for (const StepRecord& s : big_run().steps) model.step_ended(s);
  const Run& run = big_run();
  model.sample(std::span<const double>(run.series.values.data(), run.series.metrics.size()));
  return model;
}

void BM_ScrapeSnapshotUnderLock(benchmark::State& state) {
  const detail::MetricsModel model = scraped_model();
  for (auto _ : state) {
    detail::MetricsModel copy = model;
    benchmark::DoNotOptimize(copy);
  }
}
BENCHMARK(BM_ScrapeSnapshotUnderLock);

void BM_ScrapeRender(benchmark::State& state) {
  const detail::MetricsModel model = scraped_model();
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        detail::write_exposition(model.families(big_run().start_unix_ns), MetricsFormat::kOpenMetrics));
  }
}
BENCHMARK(BM_ScrapeRender)->Unit(benchmark::kMicrosecond);

void BM_HttpScrapeLoopback(benchmark::State& state) {
  auto endpoint = started_endpoint();
  for (const StepRecord& s : big_run().steps) endpoint->step_ended(s);
  httplib::Client client("127.0.0.1", endpoint->port());
  std::size_t bytes = 0;
  for (auto _ : state) {
    auto res = client.Get("/metrics", {{"Accept", "application/openmetrics-text;version=1.0.0"}});
    if (!res || res->status != 200) state.SkipWithError("scrape failed");
    else bytes = res->body.size();
  }
  state.counters["body_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_HttpScrapeLoopback)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
