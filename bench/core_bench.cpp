// Benchmarks of the monitor core, each next to its reference measured in the same binary:
//   - iteration mark vs a bare steady_clock::now()
//   - step enter+exit with the process and system probes (no GPU)
//   - the sampler at 1 ms: its CPU time / wall time, and the slowdown of a CPU-bound loop
//   - the sampler at 10 ms: CPU per sample by probe set vs bare 10 ms wake-ups
//   - peak fidelity: a ~1 ms allocation spike, exact (VmHWM) vs sampler-only at 10 ms
// scripts/bench turns the JSON output into the ratios of docs/performance.md.
#include <benchmark/benchmark.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "genscope/genscope.hpp"

namespace {

using namespace std::chrono_literals;

genscope::MonitorOptions options(bool sampler, std::chrono::microseconds interval = 10ms) {
  genscope::MonitorOptions o;
  o.nvml_probe = false;
  o.sampler = sampler;
  o.sample_interval = interval;
  return o;
}

void BM_SteadyClockNow(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(std::chrono::steady_clock::now());
}
BENCHMARK(BM_SteadyClockNow);

void BM_MarkIteration(benchmark::State& state) {
  genscope::Monitor monitor(options(false));
  genscope::ActiveRun run = monitor.start_run();
  genscope::Step step = run.step(genscope::StepKind::kSampling, "loop");
  std::int64_t n = 0;
  for (auto _ : state) {
    step.mark_iteration();
    // Keep the recorded vector bounded so the benchmark measures the mark, not page faults.
    if (++n == (1 << 20)) {
      state.PauseTiming();
      step.end();
      step = run.step(genscope::StepKind::kSampling, "loop");
      n = 0;
      state.ResumeTiming();
    }
  }
}
BENCHMARK(BM_MarkIteration);

void BM_StepEnterExit(benchmark::State& state) {
  genscope::Monitor monitor(options(false));
  genscope::ActiveRun run = monitor.start_run();
  std::int64_t n = 0;
  for (auto _ : state) {
    genscope::Step step = run.step(genscope::StepKind::kCustom, "step");
    benchmark::DoNotOptimize(step.id());
    if (++n == 20000) {  // bound the run's step list
      state.PauseTiming();
      run.finish();
      run = monitor.start_run();
      n = 0;
      state.ResumeTiming();
    }
  }
}
BENCHMARK(BM_StepEnterExit);

void BM_NestedStepEnterExit(benchmark::State& state) {
  genscope::Monitor monitor(options(false));
  genscope::ActiveRun run = monitor.start_run();
  genscope::Step outer = run.step(genscope::StepKind::kCustom, "outer");
  std::int64_t n = 0;
  for (auto _ : state) {
    genscope::Step step = run.step(genscope::StepKind::kCustom, "inner");
    benchmark::DoNotOptimize(step.id());
    if (++n == 20000) {
      state.PauseTiming();
      outer.end();
      run.finish();
      run = monitor.start_run();
      outer = run.step(genscope::StepKind::kCustom, "outer");
      n = 0;
      state.ResumeTiming();
    }
  }
}
BENCHMARK(BM_NestedStepEnterExit);

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// The main thread sleeps: all CPU time the process uses is the sampler's. Returns the CPU
// seconds and the samples taken over `duration`.
std::pair<double, double> sampler_cpu(std::chrono::microseconds interval, bool process,
                                      bool system, std::chrono::milliseconds duration) {
  genscope::MonitorOptions o = options(true, interval);
  o.process_probe = process;
  o.system_probe = system;
  genscope::Monitor monitor(o);
  genscope::ActiveRun run = monitor.start_run();
  genscope::Step step = run.step(genscope::StepKind::kSampling, "idle");
  std::this_thread::sleep_for(2 * interval);  // the sampler is started and waiting
  const genscope::Run r0 = run.snapshot();
  const double cpu0 = process_cpu_seconds();
  std::this_thread::sleep_for(duration);
  const double cpu = process_cpu_seconds() - cpu0;
  const genscope::Run r1 = run.snapshot();
  step.end();
  run.finish();
  return {cpu, static_cast<double>(r1.series.samples_taken - r0.series.samples_taken)};
}

// The physical floor of a sampler on this machine: a thread that only wakes every `interval`
// (same condition-variable timed wait as the sampler) and does nothing. Returns the CPU
// seconds and the wake-ups over `duration`.
std::pair<double, double> bare_wakeup_cpu(std::chrono::microseconds interval,
                                          std::chrono::milliseconds duration) {
  std::mutex m;
  std::condition_variable cv;
  bool stop = false;
  long wakes = 0;
  std::thread t([&] {
    std::unique_lock lock(m);
    auto next = std::chrono::steady_clock::now();
    while (!stop) {
      next += interval;
      cv.wait_until(lock, next, [&] { return stop; });
      ++wakes;
    }
  });
  std::this_thread::sleep_for(2 * interval);  // the thread is started and waiting
  long wakes0;
  {
    std::lock_guard lock(m);
    wakes0 = wakes;
  }
  const double cpu0 = process_cpu_seconds();
  std::this_thread::sleep_for(duration);
  const double cpu = process_cpu_seconds() - cpu0;
  {
    std::lock_guard lock(m);
    stop = true;
    wakes0 = wakes - wakes0;
  }
  cv.notify_all();
  t.join();
  return {cpu, static_cast<double>(wakes0)};
}

void BM_SamplerCpuAt1ms(benchmark::State& state) {
  for (auto _ : state) {
    const auto [cpu, samples] = sampler_cpu(1ms, true, true, 2s);
    state.counters["sampler_cpu_percent_of_core"] = 100.0 * cpu / 2.0;
    state.counters["samples_per_second"] = samples / 2.0;
  }
}
BENCHMARK(BM_SamplerCpuAt1ms)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_BareWakeupsAt1ms(benchmark::State& state) {
  for (auto _ : state) {
    const auto [cpu, wakes] = bare_wakeup_cpu(1ms, 2s);
    state.counters["wakeup_cpu_percent_of_core"] = 100.0 * cpu / 2.0;
  }
}
BENCHMARK(BM_BareWakeupsAt1ms)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// The default 10 ms sampler (the Python Monitor's too), CPU per sample, split by probe set,
// next to bare 10 ms wake-ups: 7 interleaved rounds of 1 s each, medians. At 10 ms the
// caches are cold at every wake-up (other threads ran in between), unlike at 1 ms.
void BM_SamplerCostAt10ms(benchmark::State& state) {
  for (auto _ : state) {
    constexpr int kRounds = 7;
    std::vector<double> bare, none, process, system, both;
    const auto per_sample_us = [](std::pair<double, double> r) {
      return r.second > 0 ? r.first / r.second * 1e6 : 0.0;
    };
    for (int round = 0; round < kRounds; ++round) {
      bare.push_back(per_sample_us(bare_wakeup_cpu(10ms, 1s)));
      none.push_back(per_sample_us(sampler_cpu(10ms, false, false, 1s)));
      process.push_back(per_sample_us(sampler_cpu(10ms, true, false, 1s)));
      system.push_back(per_sample_us(sampler_cpu(10ms, false, true, 1s)));
      both.push_back(per_sample_us(sampler_cpu(10ms, true, true, 1s)));
    }
    const auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    state.counters["bare_wakeup_us"] = median(bare);
    state.counters["sampler_no_probe_us"] = median(none);
    state.counters["sampler_process_us"] = median(process);
    state.counters["sampler_system_us"] = median(system);
    state.counters["sampler_default_us"] = median(both);
  }
}
BENCHMARK(BM_SamplerCostAt10ms)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

double cpu_bound_work() {
  double x = 0;
  for (int i = 1; i < 30'000'000; ++i) x += 1.0 / (static_cast<double>(i) * i);
  return x;
}

// Interleaved repetitions of a CPU-bound loop, sampler off and on (1 ms); medians compared.
void BM_CpuLoopSlowdownWithSampler(benchmark::State& state) {
  for (auto _ : state) {
    std::vector<double> off, on;
    for (int rep = 0; rep < 9; ++rep) {
      for (bool sampler : {false, true}) {
        genscope::Monitor monitor(options(sampler, 1ms));
        genscope::ActiveRun run = monitor.start_run();
        genscope::Step step = run.step(genscope::StepKind::kSampling, "work");
        const auto t0 = std::chrono::steady_clock::now();
        benchmark::DoNotOptimize(cpu_bound_work());
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        (sampler ? on : off).push_back(s);
      }
    }
    std::sort(off.begin(), off.end());
    std::sort(on.begin(), on.end());
    state.counters["median_off_ms"] = off[off.size() / 2] * 1e3;
    state.counters["median_on_ms"] = on[on.size() / 2] * 1e3;
    state.counters["slowdown_percent"] = (on[on.size() / 2] / off[off.size() / 2] - 1.0) * 100.0;
  }
}
BENCHMARK(BM_CpuLoopSlowdownWithSampler)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// A ~1 ms, 8 MiB allocation spike inside a step. Reports the peak rise the monitor gives
// (exact, VmHWM) and what a sampler-only monitor at 10 ms saw (from the stored series).
void BM_PeakFidelitySpike(benchmark::State& state) {
  constexpr std::size_t kSpike = 8u << 20;
  for (auto _ : state) {
    double exact_sum = 0, sampled_sum = 0, spike_ms_sum = 0;
    constexpr int kReps = 10;
    for (int rep = 0; rep < kReps; ++rep) {
      genscope::Monitor monitor(options(true, 10ms));
      genscope::ActiveRun run = monitor.start_run();
      std::this_thread::sleep_for(15ms);
      {
        genscope::Step step = run.step(genscope::StepKind::kVaeDecode, "spike");
        std::this_thread::sleep_for(std::chrono::microseconds(3000 + 1700 * rep));
        const auto t0 = std::chrono::steady_clock::now();
        void* p = mmap(nullptr, kSpike, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        std::memset(p, 1, kSpike);
        munmap(p, kSpike);
        spike_ms_sum += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        std::this_thread::sleep_for(25ms);
      }
      const genscope::Run r = run.finish();
      const genscope::StepRecord& s = r.steps.at(0);
      const genscope::MetricFigures* m = s.metric("process.rss_bytes");
      exact_sum += m->peak - m->before;
      // Sampler-only view: the highest stored sample inside the step window.
      std::size_t col = 0;
      while (r.series.metrics[col] != "process.rss_bytes") ++col;
      double sampled = m->before;
      for (std::size_t i = 0; i < r.series.size(); ++i) {
        const auto t = r.series.offset_ns[i];
        if (t >= s.start_offset_ns && t <= s.start_offset_ns + s.duration_ns) {
          sampled = std::max(sampled, r.series.at(i, col));
        }
      }
      sampled_sum += sampled - m->before;
    }
    state.counters["spike_MiB"] = static_cast<double>(kSpike) / (1 << 20);
    state.counters["spike_duration_ms"] = spike_ms_sum / kReps;
    state.counters["exact_peak_rise_MiB"] = exact_sum / kReps / (1 << 20);
    state.counters["sampled_10ms_peak_rise_MiB"] = sampled_sum / kReps / (1 << 20);
  }
}
BENCHMARK(BM_PeakFidelitySpike)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
