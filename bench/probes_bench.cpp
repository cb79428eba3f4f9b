// Cost per call of each probe operation, next to the physical floor measured in the same
// run: a bare pread of /proc/self/statm (the cheapest procfs read there is), and the bare
// syscalls each probe wraps. Every benchmark reports `x_bare_statm`: its thread CPU time
// per call divided by the bare statm pread's (best of 5 rounds of 20000).
//
//   build/bench/probes_bench                         (procfs + allocator)
//   GENSCOPE_NVML_LIBRARY=build/tests/fake_nvml/libfake_nvml.so build/bench/probes_bench
//                                                    (adds the NVML probe over the fake,
//                                                    next to the same NVML calls made bare)
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <vector>

#include "genscope/probe.hpp"
#include "probes/nvml_api.hpp"

namespace {

// Thread CPU time: the build machine is shared, and wall time under load measures the
// other jobs; the syscalls measured here run on this thread's CPU time.
struct Clock {
  using time_point = double;
  static double now() {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e9 + double(ts.tv_nsec);
  }
};

double ns_since(Clock::time_point start) { return Clock::now() - start; }

// Best-of-5 ns per pread of /proc/self/statm, measured once per process.
double bare_statm_pread_ns() {
  static const double ns = [] {
    const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    char buffer[128];
    double best = 1e30;
    for (int round = 0; round < 5; ++round) {
      const int n = 20000;
      const auto start = Clock::now();
      for (int k = 0; k < n; ++k) benchmark::DoNotOptimize(::pread(fd, buffer, sizeof buffer, 0));
      best = std::min(best, ns_since(start) / n);
    }
    ::close(fd);
    return best;
  }();
  return ns;
}

// Runs `body` per iteration and reports its cost as a multiple of the bare statm pread.
template <typename Body>
void run_with_ratio(benchmark::State& state, Body&& body) {
  const double floor_ns = bare_statm_pread_ns();
  std::int64_t calls = 0;
  const auto start = Clock::now();
  for (auto _ : state) {
    body();
    ++calls;
  }
  state.counters["x_bare_statm"] = calls ? ns_since(start) / double(calls) / floor_ns : 0.0;
}

void bare_pread(benchmark::State& state, const char* path, std::size_t size) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  std::vector<char> buffer(size);
  run_with_ratio(state,
                 [&] { benchmark::DoNotOptimize(::pread(fd, buffer.data(), buffer.size(), 0)); });
  ::close(fd);
}

void BM_BarePreadStatm(benchmark::State& state) { bare_pread(state, "/proc/self/statm", 128); }
void BM_BarePreadStatus(benchmark::State& state) { bare_pread(state, "/proc/self/status", 4096); }
void BM_BarePreadMeminfo(benchmark::State& state) { bare_pread(state, "/proc/meminfo", 8192); }

void BM_BarePwriteClearRefs(benchmark::State& state) {
  const int fd = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return state.SkipWithError("clear_refs not writable");
  run_with_ratio(state, [&] { benchmark::DoNotOptimize(::pwrite(fd, "5", 1, 0)); });
  ::close(fd);
}

template <typename Op>
void probe_bench(benchmark::State& state, std::unique_ptr<genscope::Probe> probe, Op op) {
  if (auto status = probe->open(); !status.ok()) return state.SkipWithError(status.error.c_str());
  std::vector<double> values(probe->metrics().size());
  if (auto status = op(*probe, values); !status.ok())
    return state.SkipWithError(status.error.c_str());
  run_with_ratio(state, [&] { benchmark::DoNotOptimize(op(*probe, values)); });
}

auto sample = [](genscope::Probe& p, std::vector<double>& v) { return p.sample(v); };
auto read_peaks = [](genscope::Probe& p, std::vector<double>& v) { return p.read_peaks(v); };
auto reset_peaks = [](genscope::Probe& p, std::vector<double>&) { return p.reset_peaks(); };

void BM_ProcessSample(benchmark::State& s) {
  probe_bench(s, genscope::make_process_probe(), sample);
}
void BM_ProcessReadPeaks(benchmark::State& s) {
  probe_bench(s, genscope::make_process_probe(), read_peaks);
}
void BM_ProcessResetPeaks(benchmark::State& s) {
  probe_bench(s, genscope::make_process_probe(), reset_peaks);
}
void BM_SystemSample(benchmark::State& s) { probe_bench(s, genscope::make_system_probe(), sample); }

// The cheapest possible source: measures the allocator probe's own overhead.
class ConstantSource : public genscope::AllocatorSource {
 public:
  std::string device() const override { return "cuda:0"; }
  bool read(genscope::AllocatorFigures& out, std::string&) override {
    out = {1, 2, 3, 4};
    return true;
  }
  bool reset_peaks(std::string&) override { return true; }
};

void BM_AllocatorSample(benchmark::State& s) {
  probe_bench(s, genscope::make_allocator_probe(std::make_shared<ConstantSource>()), sample);
}
void BM_AllocatorReadPeaks(benchmark::State& s) {
  probe_bench(s, genscope::make_allocator_probe(std::make_shared<ConstantSource>()), read_peaks);
}
void BM_AllocatorResetPeaks(benchmark::State& s) {
  probe_bench(s, genscope::make_allocator_probe(std::make_shared<ConstantSource>()), reset_peaks);
}

// The fake NVML needs a scenario; a real library ignores the variable.
void ensure_fake_scenario() {
  if (!std::getenv("GENSCOPE_FAKE_NVML_SCENARIO")) {
    const std::string path = "/tmp/genscope_probes_bench_nvml.json";
    std::ofstream(path)
        << R"({"driver_version":"550.54.15","devices":[{"name":"Fake","uuid":"GPU-0",
      "total":85899345920,"reserved":536870912,"used":[1073741824],
      "utilization":{"gpu":42,"memory":17},"temperature":55,"power_mw":250000,
      "clocks":{"sm":1980,"mem":2619},"processes":[{"pid":"self","used":1}]}]})";
    ::setenv("GENSCOPE_FAKE_NVML_SCENARIO", path.c_str(), 1);
  }
}

// NVML probe over whatever GENSCOPE_NVML_LIBRARY names (the fake: probe overhead only; a
// real driver: the real cost, scripts/gpu-check). Skipped when no library loads.
void BM_NvmlSample(benchmark::State& s) {
  ensure_fake_scenario();
  auto probe = genscope::make_nvml_probe();
  if (auto status = probe->open(); !status.ok()) return s.SkipWithError(status.error.c_str());
  s.counters["gpus"] = double(probe->gpus().size());
  probe_bench(s, std::move(probe), sample);
}

// The peer of BM_NvmlSample: the same NVML calls per device, made directly on the same
// library (memory v2, utilisation, temperature, power, SM and memory clocks, the processes
// list sized then read), without the probe around them.
void BM_NvmlBareCalls(benchmark::State& s) {
  ensure_fake_scenario();
  const char* env = std::getenv("GENSCOPE_NVML_LIBRARY");
  void* lib = ::dlopen(env && *env ? env : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return s.SkipWithError("NVML library not loadable");
  auto sym = [&](const char* name) { return ::dlsym(lib, name); };
  auto init = reinterpret_cast<PFN_nvmlInit_v2>(sym("nvmlInit_v2"));
  auto shutdown = reinterpret_cast<PFN_nvmlShutdown>(sym("nvmlShutdown"));
  auto count_fn = reinterpret_cast<PFN_nvmlDeviceGetCount_v2>(sym("nvmlDeviceGetCount_v2"));
  auto handle_fn =
      reinterpret_cast<PFN_nvmlDeviceGetHandleByIndex_v2>(sym("nvmlDeviceGetHandleByIndex_v2"));
  auto memory = reinterpret_cast<PFN_nvmlDeviceGetMemoryInfo_v2>(sym("nvmlDeviceGetMemoryInfo_v2"));
  auto utilization =
      reinterpret_cast<PFN_nvmlDeviceGetUtilizationRates>(sym("nvmlDeviceGetUtilizationRates"));
  auto temperature =
      reinterpret_cast<PFN_nvmlDeviceGetTemperature>(sym("nvmlDeviceGetTemperature"));
  auto power = reinterpret_cast<PFN_nvmlDeviceGetPowerUsage>(sym("nvmlDeviceGetPowerUsage"));
  auto clock = reinterpret_cast<PFN_nvmlDeviceGetClockInfo>(sym("nvmlDeviceGetClockInfo"));
  auto processes = reinterpret_cast<PFN_nvmlDeviceGetComputeRunningProcesses_v3>(
      sym("nvmlDeviceGetComputeRunningProcesses_v3"));
  if (!init || !shutdown || !count_fn || !handle_fn || !memory || !utilization || !temperature ||
      !power || !clock || !processes)
    return s.SkipWithError("NVML library lacks an entry point");
  if (init() != NVML_SUCCESS) return s.SkipWithError("nvmlInit_v2 failed");
  unsigned count = 0;
  std::vector<nvmlDevice_t> devices;
  if (count_fn(&count) == NVML_SUCCESS) {
    for (unsigned i = 0; i < count; ++i) {
      nvmlDevice_t d = nullptr;
      if (handle_fn(i, &d) == NVML_SUCCESS) devices.push_back(d);
    }
  }
  if (devices.empty()) {
    shutdown();
    return s.SkipWithError("NVML sees no GPU");
  }
  std::vector<nvmlProcessInfo_t> infos(64);
  s.counters["gpus"] = double(devices.size());
  run_with_ratio(s, [&] {
    for (nvmlDevice_t d : devices) {
      nvmlMemory_v2_t m{};
      m.version = nvmlMemory_v2;
      benchmark::DoNotOptimize(memory(d, &m));
      nvmlUtilization_t u{};
      benchmark::DoNotOptimize(utilization(d, &u));
      unsigned value = 0;
      benchmark::DoNotOptimize(temperature(d, NVML_TEMPERATURE_GPU, &value));
      benchmark::DoNotOptimize(power(d, &value));
      benchmark::DoNotOptimize(clock(d, NVML_CLOCK_SM, &value));
      benchmark::DoNotOptimize(clock(d, NVML_CLOCK_MEM, &value));
      unsigned n = 0;
      if (processes(d, &n, nullptr) == NVML_ERROR_INSUFFICIENT_SIZE) {
        n = static_cast<unsigned>(infos.size());
        benchmark::DoNotOptimize(processes(d, &n, infos.data()));
      }
    }
  });
  shutdown();  // the library stays mapped, as genscope's probe leaves it
}

}  // namespace

BENCHMARK(BM_BarePreadStatm);
BENCHMARK(BM_ProcessSample);
BENCHMARK(BM_BarePreadStatus);
BENCHMARK(BM_ProcessReadPeaks);
BENCHMARK(BM_BarePwriteClearRefs);
BENCHMARK(BM_ProcessResetPeaks);
BENCHMARK(BM_BarePreadMeminfo);
BENCHMARK(BM_SystemSample);
BENCHMARK(BM_AllocatorSample);
BENCHMARK(BM_AllocatorReadPeaks);
BENCHMARK(BM_AllocatorResetPeaks);
BENCHMARK(BM_NvmlSample);
BENCHMARK(BM_NvmlBareCalls);
BENCHMARK_MAIN();
