// Tensor stats / compare throughput against the memory read bandwidth of the same buffers.
//
// Size: GENSCOPE_BENCH_BYTES per operand (default 256 MiB). Each benchmark reports
// bytes_per_second and "x_read_bw" = its throughput / the read bandwidth measured in this
// run by a plain threaded sum over the same buffers (one stream for stats, two for diff).
// Times are process CPU time (all threads): the build machine is shared and oversubscribed,
// so wall time measures the scheduler; CPU time measures the code (see the docs).
//   GENSCOPE_BENCH_BYTES=1073741824 ./build/bench/tensor_bench
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <thread>
#include <vector>

#include "genscope/tensor_compare.hpp"
#include "genscope/tensor_stats.hpp"

namespace {

using genscope::DType;

std::size_t bench_bytes() {
  const char* env = std::getenv("GENSCOPE_BENCH_BYTES");
  return env != nullptr ? std::strtoull(env, nullptr, 10) : (std::size_t{256} << 20);
}

unsigned bench_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

// Operand buffers per dtype, filled once (first touch outside the timed loops).
struct Buffers {
  std::vector<std::uint8_t> a, b;
};

std::uint16_t to_half(float f) {  // round-to-nearest-ish f32 -> f16 for finite moderate values
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  const std::uint32_t sign = (x >> 16) & 0x8000;
  const int exp = static_cast<int>((x >> 23) & 0xFF) - 127 + 15;
  if (exp <= 0) return static_cast<std::uint16_t>(sign);
  return static_cast<std::uint16_t>(sign | (exp << 10) | ((x >> 13) & 0x3FF));
}

const Buffers& buffers(DType dtype) {
  static std::map<DType, Buffers> cache;
  auto it = cache.find(dtype);
  if (it != cache.end()) return it->second;
  Buffers& buf = cache[dtype];
  const std::size_t bytes = bench_bytes();
  buf.a.resize(bytes);
  buf.b.resize(bytes);
  const std::size_t n = bytes / genscope::dtype_size(dtype);
  std::uint32_t state = 12345;
  for (std::size_t i = 0; i < n; ++i) {
    state = state * 1664525u + 1013904223u;
    const float x = static_cast<float>(state >> 8) / 16777216.0f * 4.0f - 2.0f;
    const float y = x + 1e-3f * static_cast<float>((state >> 3) & 7);
    if (dtype == DType::kF32) {
      std::memcpy(&buf.a[i * 4], &x, 4);
      std::memcpy(&buf.b[i * 4], &y, 4);
    } else {
      std::uint32_t bx, by;
      std::memcpy(&bx, &x, 4);
      std::memcpy(&by, &y, 4);
      const std::uint16_t hx = dtype == DType::kF16 ? to_half(x) : static_cast<std::uint16_t>(bx >> 16);
      const std::uint16_t hy = dtype == DType::kF16 ? to_half(y) : static_cast<std::uint16_t>(by >> 16);
      std::memcpy(&buf.a[i * 2], &hx, 2);
      std::memcpy(&buf.b[i * 2], &hy, 2);
    }
  }
  return buf;
}

// The physical reference: threaded sum of 64-bit words (auto-vectorised, 4 accumulators).
std::uint64_t read_sum(const std::uint8_t* p, std::size_t bytes) {
  const std::size_t words = bytes / 8;
  const unsigned threads = bench_threads();
  std::vector<std::uint64_t> part(threads);
  auto work = [&](unsigned t) {
    const std::size_t begin = words * t / threads, end = words * (t + 1) / threads;
    const auto* w = reinterpret_cast<const std::uint64_t*>(p);
    std::uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    std::size_t i = begin;
    // With the same 4 KiB software prefetch as the kernels, so the reference is the best
    // read this machine does, not a weaker loop.
    for (; i + 8 <= end; i += 8) {
      __builtin_prefetch(w + i + 512, 0, 3);
      s0 += w[i], s1 += w[i + 1], s2 += w[i + 2], s3 += w[i + 3];
      s0 += w[i + 4], s1 += w[i + 5], s2 += w[i + 6], s3 += w[i + 7];
    }
    for (; i < end; ++i) s0 += w[i];
    part[t] = s0 + s1 + s2 + s3;
  };
  {
    std::vector<std::jthread> pool;
    for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work, t);
    work(0);
  }
  std::uint64_t s = 0;
  for (std::uint64_t v : part) s += v;
  return s;
}

// Best-of-5 read bandwidth (bytes per process-CPU second, like the benchmarks) over
// `streams` buffers of the f32 set.
double read_bandwidth(int streams) {
  static std::map<int, double> cache;
  if (cache.count(streams)) return cache[streams];
  const Buffers& buf = buffers(DType::kF32);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const std::clock_t t0 = std::clock();
    std::uint64_t s = read_sum(buf.a.data(), buf.a.size());
    if (streams == 2) s += read_sum(buf.b.data(), buf.b.size());
    benchmark::DoNotOptimize(s);
    const double sec = static_cast<double>(std::clock() - t0) / CLOCKS_PER_SEC;
    best = std::max(best, static_cast<double>(buf.a.size()) * streams / sec);
  }
  return cache[streams] = best;
}

void BM_ReadBandwidth(benchmark::State& state) {
  const Buffers& buf = buffers(DType::kF32);
  for (auto _ : state) benchmark::DoNotOptimize(read_sum(buf.a.data(), buf.a.size()));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * buf.a.size()));
}

genscope::TensorView view_of(const std::vector<std::uint8_t>& bytes, DType dtype) {
  return {.data = bytes.data(),
          .shape = {static_cast<std::int64_t>(bytes.size() / genscope::dtype_size(dtype))},
          .dtype = dtype};
}

void BM_Stats(benchmark::State& state, DType dtype, bool hash, unsigned threads) {
  const Buffers& buf = buffers(dtype);
  const double bw = read_bandwidth(1);
  const genscope::TensorView v = view_of(buf.a, dtype);
  for (auto _ : state) {
    benchmark::DoNotOptimize(genscope::compute_stats(v, {.hash = hash, .threads = threads}));
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * buf.a.size()));
  state.counters["x_read_bw"] = benchmark::Counter(
      static_cast<double>(buf.a.size()) / bw, benchmark::Counter::kIsIterationInvariantRate);

}

// Strided (transposed 2-D) view of the same f32 buffer: the gather path.
void BM_StatsStrided(benchmark::State& state) {
  const Buffers& buf = buffers(DType::kF32);
  const std::int64_t n = static_cast<std::int64_t>(buf.a.size() / 4);
  const std::int64_t rows = 4096, cols = n / rows;
  const genscope::TensorView v{
      .data = buf.a.data(), .shape = {cols, rows}, .strides = {1, cols}, .dtype = DType::kF32};
  for (auto _ : state) benchmark::DoNotOptimize(genscope::compute_stats(v, {.hash = false}));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * rows * cols * 4));
}

// Compute-bound speed of one core: 256 KiB that stays in L2, no hash.
void BM_StatsInCache(benchmark::State& state, DType dtype) {
  const Buffers& buf = buffers(dtype);
  genscope::TensorView v = view_of(buf.a, dtype);
  v.shape = {static_cast<std::int64_t>((256 << 10) / genscope::dtype_size(dtype))};
  for (auto _ : state) {
    benchmark::DoNotOptimize(genscope::compute_stats(v, {.hash = false, .threads = 1}));
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * (256 << 10)));
}

void BM_ReadInCache(benchmark::State& state) {
  const Buffers& buf = buffers(DType::kF32);
  const auto* w = reinterpret_cast<const std::uint64_t*>(buf.a.data());
  const std::size_t words = (256 << 10) / 8;
  for (auto _ : state) {
    std::uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (std::size_t i = 0; i < words; i += 4) {
      s0 += w[i], s1 += w[i + 1], s2 += w[i + 2], s3 += w[i + 3];
    }
    benchmark::DoNotOptimize(s0 + s1 + s2 + s3);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * (256 << 10)));
}

void BM_Compare(benchmark::State& state, DType dtype) {
  const Buffers& buf = buffers(dtype);
  const double bw = read_bandwidth(2);
  const genscope::TensorView a = view_of(buf.a, dtype);
  const genscope::TensorView b = view_of(buf.b, dtype);
  for (auto _ : state) benchmark::DoNotOptimize(genscope::compare_tensors(a, b));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * 2 * buf.a.size()));
  state.counters["x_read_bw"] = benchmark::Counter(
      2.0 * static_cast<double>(buf.a.size()) / bw,
      benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

BENCHMARK(BM_ReadBandwidth)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_Stats, f32, DType::kF32, false, 0)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_Stats, f32_hash, DType::kF32, true, 0)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_Stats, f32_1thread, DType::kF32, false, 1)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_Stats, f32_1thread_fused_hash, DType::kF32, true, 1)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_Stats, f16, DType::kF16, false, 0)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_Stats, f16_hash, DType::kF16, true, 0)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_Stats, bf16, DType::kBF16, false, 0)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_Stats, bf16_hash, DType::kBF16, true, 0)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK(BM_StatsStrided)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK(BM_ReadInCache)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_StatsInCache, f32, DType::kF32)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_StatsInCache, f16, DType::kF16)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_StatsInCache, bf16, DType::kBF16)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Compare, f32, DType::kF32)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_Compare, f16, DType::kF16)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_Compare, bf16, DType::kBF16)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_MAIN();
