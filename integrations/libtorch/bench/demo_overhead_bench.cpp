// Monitoring overhead on a real workload: the reference pipeline run with the monitor off
// and on (10 ms sampling, all probes, analyses and dumps), interleaved off/on so machine
// load drifts hit both sides alike. Reports the median wall time of each side and their
// ratio (goal <= 1.02). Arguments: preset index (0 tiny, 1 small), steps, repetitions,
// dumps (1: the monitored side also writes the .npy dumps, as `genscope demo` does).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "genscope/reference_pipeline.hpp"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Monitor variants for attributing the overhead: 0 everything, 1 without the process
// probe (VmHWM resets), 2 without the sampler thread.
int g_variant = 0;

double run_once(const genscope::DemoOptions& o, bool monitored) {
  genscope::MonitorOptions mo;
  mo.process_probe = g_variant != 1;
  mo.sampler = g_variant != 2;
  mo.enabled = monitored;
  mo.sample_interval = std::chrono::microseconds(10'000);
  genscope::Monitor monitor(mo);
  const auto t0 = std::chrono::steady_clock::now();
  genscope::DemoResult r = genscope::run_reference_pipeline(o, monitor);
  const auto t1 = std::chrono::steady_clock::now();
  benchmark::DoNotOptimize(r.output_hash);
  if (!r.error.empty()) std::abort();
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

void BM_DemoMonitoringOverhead(benchmark::State& state) {
  genscope::DemoOptions o;
  o.preset = state.range(0) == 0 ? "tiny" : "small";
  o.steps = static_cast<int>(state.range(1));
  o.threads = 1;
  o.out_dir = std::filesystem::temp_directory_path() / "genscope-demo-bench";
  const int reps = static_cast<int>(state.range(2));
  o.write_dumps = state.range(3) != 0;
  g_variant = static_cast<int>(state.range(4));
  run_once(o, true);  // generate the cached weights and warm up both paths
  run_once(o, false);
  std::vector<double> off, on;
  for (auto _ : state) {
    for (int i = 0; i < reps; ++i) {
      // Alternate which side goes first so neither always follows the other.
      if (i % 2 == 0) {
        off.push_back(run_once(o, false));
        on.push_back(run_once(o, true));
      } else {
        on.push_back(run_once(o, true));
        off.push_back(run_once(o, false));
      }
    }
  }
  const double m_off = median(off), m_on = median(on);
  state.counters["off_ms"] = m_off;
  state.counters["on_ms"] = m_on;
  state.counters["on_over_off"] = m_on / m_off;
  state.counters["min_ratio"] =
      *std::min_element(on.begin(), on.end()) / *std::min_element(off.begin(), off.end());
  state.SetLabel(o.preset + ", " + std::to_string(o.steps) + " steps, " + std::to_string(reps) +
                 " interleaved pairs" + (o.write_dumps ? ", dumps" : ", no dumps") +
                 (g_variant == 1   ? ", no process probe"
                  : g_variant == 2 ? ", no sampler"
                                   : ""));
}

}  // namespace

BENCHMARK(BM_DemoMonitoringOverhead)
    ->Args({0, 8, 8, 1, 0})
    ->Args({0, 8, 8, 0, 0})
    ->Args({0, 8, 8, 0, 1})
    ->Args({0, 8, 8, 0, 2})
    ->Args({1, 4, 3, 1, 0})
    ->Args({1, 4, 3, 0, 1})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK_MAIN();
