// Run history benchmarks. Goals: insert one run with 10 steps and 100k samples < 50 ms;
// regressions over 10,000 stored runs < 100 ms. Peers measured in the same binary:
// serialising the run document alone (to_json + dump) and writing it as a run file
// (write_run_file: temp file + fsync + rename); a bare sqlite3 scan of the same step rows.
#include <benchmark/benchmark.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "genscope/history.hpp"
#include "genscope/regression.hpp"
#include "genscope/run_json.hpp"

namespace {

namespace fs = std::filesystem;
using namespace genscope;

fs::path bench_dir() {
  const fs::path dir = fs::temp_directory_path() / ("genscope_store_bench_" + std::to_string(getuid()));
  fs::create_directories(dir);
  return dir;
}

Run make_run(int index, std::size_t samples, std::mt19937_64& rng) {
  std::normal_distribution<double> jitter(1.0, 0.02);
  Run run;
  run.id = "bench" + std::to_string(index);
  run.start_unix_ns = (1'700'000'000LL + index) * 1'000'000'000LL;
  run.start_utc = "2026-11-21T12:00:00Z";
  run.pipeline.name = "pipeline" + std::to_string(index % 5);
  run.pipeline.model = "model";
  run.pipeline.architecture = "MMDiT";
  run.pipeline.parameters = {{"steps", "20"}, {"resolution", "1024x1024"}};
  run.host.hostname = "host";
  run.gpus.push_back({0, "NVIDIA H200", "GPU-0", "560", 141e9});
  std::int64_t t = 0;
  for (int s = 0; s < 10; ++s) {
    StepRecord step;
    step.id = s;
    step.name = "step" + std::to_string(s);
    step.kind = s == 5 ? StepKind::kSampling : StepKind::kCustom;
    step.status = StepStatus::kOk;
    step.start_offset_ns = t;
    step.duration_ns = static_cast<std::int64_t>(1e8 * (s + 1) * jitter(rng));
    for (const char* name : {"process.rss_bytes", "gpu0.used_bytes"}) {
      MetricFigures m;
      m.name = name;
      m.before = 1e9;
      m.peak = 2e9;
      m.after = 1.5e9;
      m.peak_source = "sampled";
      step.metrics.push_back(m);
    }
    if (s == 5)
      for (int i = 0; i < 20; ++i) step.iteration_ns.push_back(step.duration_ns / 20);
    t += step.duration_ns;
    run.steps.push_back(step);
  }
  run.duration_ns = t;
  run.series.metrics = {"process.rss_bytes", "gpu0.used_bytes", "gpu0.utilization_percent",
                        "system.used_bytes"};
  run.series.units = {Unit::kBytes, Unit::kBytes, Unit::kPercent, Unit::kBytes};
  run.series.interval_ns = 10'000'000;
  run.series.samples_taken = samples;
  run.series.capacity = samples;
  for (std::size_t i = 0; i < samples; ++i) {
    run.series.offset_ns.push_back(static_cast<std::int64_t>(i) * 10'000'000);
    run.series.values.push_back(1e9 + static_cast<double>(i) * 4096);
    run.series.values.push_back(2e10 + static_cast<double>(i) * 8192);
    run.series.values.push_back(static_cast<double>(i % 100));
    run.series.values.push_back(3e10 + static_cast<double>(i));
  }
  return run;
}

const Run& big_run() {
  static std::mt19937_64 rng(1);
  static const Run run = make_run(0, 100'000, rng);
  return run;
}

void BM_SerializeRunDocument(benchmark::State& state) {
  const Run& run = big_run();
  std::size_t bytes = 0;
  for (auto _ : state) {
    const std::string doc = to_json(run).dump();
    bytes = doc.size();
    benchmark::DoNotOptimize(doc.data());
  }
  state.counters["document_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_SerializeRunDocument)->Unit(benchmark::kMillisecond);

void BM_WriteRunFile(benchmark::State& state) {
  const Run& run = big_run();
  const fs::path path = bench_dir() / "run.json";
  for (auto _ : state) write_run_file(run, path);
}
BENCHMARK(BM_WriteRunFile)->Unit(benchmark::kMillisecond);

void BM_InsertRun10Steps100kSamples(benchmark::State& state) {
  Run run = big_run();
  const fs::path path = bench_dir() / "insert.db";
  fs::remove(path);
  fs::remove(path.string() + "-wal");
  fs::remove(path.string() + "-shm");
  HistoryStore store(path);
  int i = 0;
  for (auto _ : state) {
    run.id = "insert" + std::to_string(i++);
    store.insert(run);
  }
}
BENCHMARK(BM_InsertRun10Steps100kSamples)->Unit(benchmark::kMillisecond);

// The 10,000-run database is built once and reused across invocations.
fs::path history_10k() {
  const fs::path path = bench_dir() / "history10k.db";
  {
    HistoryStore store(path);
    if (store.size() == 10'000) return path;
  }
  fs::remove(path);
  fs::remove(path.string() + "-wal");
  fs::remove(path.string() + "-shm");
  HistoryStore store(path);
  std::mt19937_64 rng(2);
  for (int i = 0; i < 10'000; ++i) store.insert(make_run(i, 0, rng));
  return path;
}

void BM_Regressions10kRuns(benchmark::State& state) {
  HistoryStore store(history_10k());
  std::size_t series = 0;
  for (auto _ : state) {
    const auto findings = find_regressions(store.observations());
    series = findings.size();
    benchmark::DoNotOptimize(findings.data());
  }
  state.counters["series"] = static_cast<double>(series);
}
BENCHMARK(BM_Regressions10kRuns)->Unit(benchmark::kMillisecond);

// Peer: a bare sqlite3 scan of the same step rows (no strings copied, no analysis).
void BM_RawStepScan10kRuns(benchmark::State& state) {
  const fs::path path = history_10k();
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db,
                     "SELECT run, name, duration_ns FROM steps",
                     -1, &st, nullptr);
  std::int64_t rows = 0;
  for (auto _ : state) {
    rows = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
      benchmark::DoNotOptimize(sqlite3_column_int64(st, 3));
      ++rows;
    }
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  state.counters["rows"] = static_cast<double>(rows);
}
BENCHMARK(BM_RawStepScan10kRuns)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
