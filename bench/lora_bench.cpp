// LoRA benchmarks, each against a peer or a physical limit measured in the same run:
//  - inspect + map a 2,000-module LoRA against a ~2,500-tensor SDXL-like base (both loader
//    profiles, as `lora inspect --base` does; and one loader only), vs Python's json.loads of
//    the same two headers (bench/lora_json_peer.py, run by this binary);
//  - the merge kernel vs the same BLAS's sgemm FLOP rate and vs a streaming write of the same
//    bytes (BM_MergeKernel), and the whole file merge (BM_MergeFile);
//  - ||dW||_F by the trace identity vs forming up·down (rank 16, 1280×1280).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <future>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "genscope/lora.hpp"
#include "genscope/model_patcher.hpp"
#include "genscope/safetensors.hpp"
#include "lora/matmul.hpp"
#include "lora/merge_kernel.hpp"
#include "model/float_convert.hpp"

namespace {

using namespace genscope;
namespace fs = std::filesystem;

fs::path bench_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("genscope_lora_bench_" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

// SDXL-like ldm UNet + CLIP-L + OpenCLIP-bigG key names with tiny shapes.
std::vector<std::pair<std::string, std::vector<std::int64_t>>> sdxl_like_keys() {
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> keys;
  const std::int64_t c = 8;
  const auto transformer = [&](const std::string& p, int depth) {
    for (const char* s : {"norm.weight", "norm.bias", "proj_in.weight", "proj_in.bias", "proj_out.weight", "proj_out.bias"})
      keys.push_back({p + s, std::string(s).find("proj") != std::string::npos && std::string(s).ends_with("weight") ? std::vector<std::int64_t>{c, c} : std::vector<std::int64_t>{c}});
    for (int t = 0; t < depth; ++t) {
      const std::string b = p + "transformer_blocks." + std::to_string(t) + ".";
      for (const char* s : {"attn1.to_q", "attn1.to_k", "attn1.to_v", "attn1.to_out.0", "attn2.to_q", "attn2.to_k",
                            "attn2.to_v", "attn2.to_out.0", "ff.net.0.proj", "ff.net.2"})
        keys.push_back({b + s + ".weight", {c, c}});
      for (const char* s : {"norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias", "norm3.weight", "norm3.bias",
                            "attn1.to_out.0.bias", "attn2.to_out.0.bias", "ff.net.0.proj.bias", "ff.net.2.bias"})
        keys.push_back({b + s, {c}});
    }
  };
  const auto resnet = [&](const std::string& p) {
    for (const char* s : {"in_layers.2.weight", "out_layers.3.weight"}) keys.push_back({p + s, {c, c, 3, 3}});
    keys.push_back({p + "emb_layers.1.weight", {c, c}});
    for (const char* s : {"in_layers.0.weight", "in_layers.0.bias", "in_layers.2.bias", "emb_layers.1.bias",
                          "out_layers.0.weight", "out_layers.0.bias", "out_layers.3.bias"})
      keys.push_back({p + s, {c}});
  };
  const std::string u = "model.diffusion_model.";
  keys.push_back({u + "input_blocks.0.0.weight", {c, 4, 3, 3}});
  const int depth[3] = {0, 2, 10};
  int n = 1;
  for (int x = 0; x < 3; ++x) {
    for (int i = 0; i < 2; ++i, ++n) {
      resnet(u + "input_blocks." + std::to_string(n) + ".0.");
      if (depth[x]) transformer(u + "input_blocks." + std::to_string(n) + ".1.", depth[x]);
    }
    if (x < 2) keys.push_back({u + "input_blocks." + std::to_string(n++) + ".0.op.weight", {c, c, 3, 3}});
  }
  resnet(u + "middle_block.0.");
  transformer(u + "middle_block.1.", 10);
  resnet(u + "middle_block.2.");
  for (int m = 0; m < 9; ++m) {
    resnet(u + "output_blocks." + std::to_string(m) + ".0.");
    if (depth[2 - m / 3]) transformer(u + "output_blocks." + std::to_string(m) + ".1.", depth[2 - m / 3]);
  }
  keys.push_back({u + "label_emb.0.0.weight", {c, c}});
  for (int l = 0; l < 12; ++l) {
    const std::string p = "conditioner.embedders.0.transformer.text_model.encoder.layers." + std::to_string(l) + ".";
    for (const char* s : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.out_proj", "mlp.fc1", "mlp.fc2"}) {
      keys.push_back({p + s + ".weight", {c, c}});
      keys.push_back({p + s + ".bias", {c}});
    }
    for (const char* s : {"layer_norm1.weight", "layer_norm1.bias", "layer_norm2.weight", "layer_norm2.bias"}) keys.push_back({p + s, {c}});
  }
  for (int l = 0; l < 32; ++l) {
    const std::string p = "conditioner.embedders.1.model.transformer.resblocks." + std::to_string(l) + ".";
    keys.push_back({p + "attn.in_proj_weight", {3 * c, c}});
    for (const char* s : {"attn.out_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"}) keys.push_back({p + s, {c, c}});
    for (const char* s : {"ln_1.weight", "ln_1.bias", "ln_2.weight", "ln_2.bias", "attn.in_proj_bias",
                          "attn.out_proj.bias", "mlp.c_fc.bias", "mlp.c_proj.bias"})
      keys.push_back({p + s, {c}});
  }
  // VAE: enough first_stage_model keys to reach the ~2,500 tensors of a real SDXL checkpoint.
  for (int b = 0; b < 4; ++b)
    for (int r = 0; r < 3; ++r)
      for (const char* s : {"norm1.weight", "norm1.bias", "conv1.weight", "conv1.bias", "norm2.weight", "norm2.bias",
                            "conv2.weight", "conv2.bias"})
        for (const char* part : {"encoder.down.", "decoder.up."})
          keys.push_back({std::string("first_stage_model.") + part + std::to_string(b) + ".block." + std::to_string(r) + "." + s, {c}});
  return keys;
}

void write_random(const fs::path& path, const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& keys,
                  DType dtype) {
  std::vector<SafetensorsSource> sources;
  for (const auto& [name, shape] : keys) {
    sources.push_back({name, dtype, shape, [dtype](std::span<std::byte> out) {
                         std::mt19937 rng(7);
                         std::normal_distribution<float> nd(0.0f, 0.1f);
                         std::vector<float> v(out.size() / dtype_size(dtype));
                         for (float& x : v) x = nd(rng);
                         detail::convert_from_f32(v.data(), v.size(), dtype, out.data());
                       }});
  }
  write_safetensors(path, sources);
}

struct InspectFiles {
  fs::path base, lora;
  std::size_t base_keys = 0, modules = 0;
};

const InspectFiles& inspect_files() {
  static const InspectFiles files = [] {
    InspectFiles f;
    f.base = bench_dir() / "sdxl_like.safetensors";
    f.lora = bench_dir() / "lora_2000.safetensors";
    const auto keys = sdxl_like_keys();
    write_random(f.base, keys, DType::kF16);
    f.base_keys = keys.size();
    std::vector<std::pair<std::string, std::vector<std::int64_t>>> lora;
    const auto add_module = [&](const std::string& name, std::int64_t out, std::int64_t in) {
      lora.push_back({name + ".lora_down.weight", {4, in}});
      lora.push_back({name + ".lora_up.weight", {out, 4}});
      lora.push_back({name + ".alpha", {}});
      ++f.modules;
    };
    for (const auto& [key, shape] : keys) {
      if (shape.size() != 2 || key.find("in_proj") != std::string::npos) continue;
      std::string name = key.substr(0, key.size() - 7);
      if (name.rfind("model.diffusion_model.", 0) == 0) name = "lora_unet_" + name.substr(22);
      else if (name.rfind("conditioner.embedders.0.transformer.", 0) == 0) name = "lora_te1_" + name.substr(36);
      else name = "lora_te2_" + name.substr(34);
      std::replace(name.begin(), name.end(), '.', '_');
      add_module(name, shape[0], shape[1]);
    }
    for (int i = 0; f.modules < 2000; ++i) add_module("lora_unet_extra_block_" + std::to_string(i) + "_proj", 8, 8);
    write_random(f.lora, lora, DType::kF16);
    return f;
  }();
  return files;
}

void BM_InspectAndMap(benchmark::State& state) {
  const InspectFiles& f = inspect_files();
  std::size_t matched = 0;
  for (auto _ : state) {
    // As `lora inspect --base` does: the base's header read while the LoRA is analysed.
    auto base = std::async(std::launch::async, [&f] { return SafetensorsFile::open(f.base); });
    const auto lora = LoraFile::open(f.lora, true);
    const LoraFit fit = fit_lora(*lora, base.get());
    matched = fit.matched.size();
    benchmark::DoNotOptimize(matched);
  }
  // The peer: Python json.loads of the same two headers (best of 20), in this run.
  const std::string script = fs::path(__FILE__).parent_path() / "lora_json_peer.py";
  const std::string cmd = "/usr/bin/python3 " + script + " " + f.lora.string() + " " + f.base.string() + " 20";
  double python_s = NAN;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    if (std::fscanf(p, "%lf", &python_s) != 1) python_s = NAN;
    ::pclose(p);
  }
  state.counters["modules"] = static_cast<double>(f.modules);
  state.counters["base_tensors"] = static_cast<double>(f.base_keys);
  state.counters["matched"] = static_cast<double>(matched);
  state.counters["python_json_loads_ms"] = python_s * 1e3;
}
// Two threads at work (the base's header, the other loader's fit): wall time and the process's
// CPU time.
BENCHMARK(BM_InspectAndMap)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();

// The same with one loader's fit only (what `lora apply` and fit_lora(..., false) do; the CLI's
// inspect also computes the other loader for its comparison line, as BM_InspectAndMap does).
void BM_InspectAndMapOneLoader(benchmark::State& state) {
  const InspectFiles& f = inspect_files();
  for (auto _ : state) {
    const auto lora = LoraFile::open(f.lora, true);
    const auto base = SafetensorsFile::open(f.base);
    benchmark::DoNotOptimize(fit_lora(*lora, base, LoraLoader::kComfyUI, false).matched.size());
  }
}
BENCHMARK(BM_InspectAndMapOneLoader)->Unit(benchmark::kMillisecond);

// The parts of BM_InspectAndMap: opening + analysing the LoRA, and mapping it onto the base.
void BM_InspectOnly(benchmark::State& state) {
  const InspectFiles& f = inspect_files();
  for (auto _ : state) benchmark::DoNotOptimize(LoraFile::open(f.lora, state.range(0) != 0));
}
BENCHMARK(BM_InspectOnly)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// The floor under both: genscope's strict safetensors header parse of the two files.
void BM_HeaderParseOnly(benchmark::State& state) {
  const InspectFiles& f = inspect_files();
  for (auto _ : state) {
    benchmark::DoNotOptimize(SafetensorsFile::open(f.lora));
    benchmark::DoNotOptimize(SafetensorsFile::open(f.base));
  }
}
BENCHMARK(BM_HeaderParseOnly)->Unit(benchmark::kMillisecond);

void BM_FitOnly(benchmark::State& state) {
  const InspectFiles& f = inspect_files();
  const auto lora = LoraFile::open(f.lora, false);
  const auto base = SafetensorsFile::open(f.base);
  for (auto _ : state) benchmark::DoNotOptimize(fit_lora(*lora, base));
}
BENCHMARK(BM_FitOnly)->Unit(benchmark::kMillisecond);

void BM_KeyMapOnly(benchmark::State& state) {
  const InspectFiles& f = inspect_files();
  const auto base = SafetensorsFile::open(f.base);
  std::vector<std::string> keys;
  for (const auto& e : base.entries()) keys.push_back(e.name);
  for (auto _ : state) benchmark::DoNotOptimize(lora_key_map(keys));
}
BENCHMARK(BM_KeyMapOnly)->Unit(benchmark::kMillisecond);

// ---- merge kernel vs its physical limits, measured in the same run -------------------------
// The fused merge of 16 F16 weights of 1280×1280 (52 MB of W, the size of SDXL's larger
// attention projections) as merge_lora runs it: per block of rows F16 -> F32, W += s·up·down
// (OpenBLAS sgemm on the worker's own thread), F32 -> F16, blocks handed out over `threads`
// threads (second argument: 1, or one per core). Peers, on the same number of threads:
//  - the same BLAS's sgemm on the same shapes (M = N = 1280, K = rank, F32 C += A·B), OpenBLAS
//    threaded its own way (held to one thread for the 1-thread row): the FLOP rate the merge
//    could reach if conversion were free;
//  - a streaming write of the same bytes (memset of a 52 MB buffer, split over the threads):
//    the byte rate it could reach if the arithmetic were free;
//  - for context, a copy of the same bytes (memcpy W_in -> W_out): the merge must read W as
//    well as write it, so this is its real floor (memset only writes).
// All are timed interleaved, best of `kReps` (the machine is shared; the fastest run is the
// least disturbed one), in process CPU time (all threads; robust to other load, exact for one
// thread) and in wall-clock time (what a user waits; meaningful on an idle machine only).
constexpr std::int64_t kRows = 1280, kCols = 1280, kWeights = 16;
constexpr int kReps = 7;

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double cpu_seconds() {  // every thread of the process
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

// Fastest wall and CPU time of fn over the repetitions (kept separately).
struct Best {
  double wall = 1e30, cpu = 1e30;
  template <class F>
  void time(F&& fn) {
    const double w0 = wall_seconds(), c0 = cpu_seconds();
    fn();
    cpu = std::min(cpu, cpu_seconds() - c0);
    wall = std::min(wall, wall_seconds() - w0);
  }
};

// fn(begin, end) over [0, n) split in `threads` contiguous parts, one std::thread each.
template <class F>
void split(int threads, std::size_t n, F&& fn) {
  std::vector<std::thread> workers;
  for (int t = 1; t < threads; ++t) {
    workers.emplace_back([&, t] { fn(n * t / threads, n * (t + 1) / threads); });
  }
  fn(0, n / static_cast<std::size_t>(threads));
  for (auto& w : workers) w.join();
}

struct MergeData {
  std::vector<detail::PreparedLora> patches;
  std::vector<std::uint16_t> w_in, w_out;
  std::vector<float> a, b, c;  // sgemm peer: A (M×K), B (K×N), C (M×N)
  std::vector<char> stream;    // memset peer: the bytes of W
};

MergeData make_merge_data(std::int64_t rank) {
  MergeData d;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 0.1f);
  d.patches.resize(1);
  d.patches[0].rank = rank;
  d.patches[0].coefficient = 0.8f;
  d.patches[0].up.resize(kRows * rank);
  d.patches[0].down.resize(rank * kCols);
  for (float& x : d.patches[0].up) x = nd(rng);
  for (float& x : d.patches[0].down) x = nd(rng);
  d.w_in.resize(kWeights * kRows * kCols);
  d.w_out.resize(d.w_in.size());
  for (auto& x : d.w_in) x = detail::f32_to_f16(nd(rng));
  d.a = d.patches[0].up;
  d.b = d.patches[0].down;
  d.c.resize(kRows * kCols);
  for (float& x : d.c) x = nd(rng);
  d.stream.assign(d.w_in.size() * 2, 1);
  return d;
}

void run_merge(MergeData& d, int threads) {
  for (std::int64_t t = 0; t < kWeights; ++t) {
    detail::merge_rows(reinterpret_cast<const std::byte*>(d.w_in.data() + t * kRows * kCols),
                       reinterpret_cast<std::byte*>(d.w_out.data() + t * kRows * kCols), DType::kF16, 0,
                       kRows, kCols, d.patches, threads);
  }
  benchmark::ClobberMemory();
}

void run_sgemm(MergeData& d, std::int64_t rank, int threads) {
  std::optional<detail::SingleThreadedBlas> one_thread;
  if (threads == 1) one_thread.emplace();
  for (std::int64_t t = 0; t < kWeights; ++t) {
    detail::matmul_add(d.a.data(), d.b.data(), d.c.data(), kRows, rank, kCols, 0.8f);
  }
  benchmark::ClobberMemory();
}

void run_stream(MergeData& d, int threads) {
  static char fill = 0;
  const char value = ++fill;
  split(threads, d.stream.size(), [&](std::size_t b0, std::size_t b1) { std::memset(d.stream.data() + b0, value, b1 - b0); });
  benchmark::ClobberMemory();
}

void run_copy(MergeData& d, int threads) {
  const auto* src = reinterpret_cast<const char*>(d.w_in.data());
  auto* dst = reinterpret_cast<char*>(d.w_out.data());
  split(threads, d.w_in.size() * 2, [&](std::size_t b0, std::size_t b1) { std::memcpy(dst + b0, src + b0, b1 - b0); });
  benchmark::ClobberMemory();
}

void BM_MergeKernel(benchmark::State& state) {
  const std::int64_t rank = state.range(0);
  const int threads = state.range(1) == 0 ? detail::merge_threads(kRows, kCols) : static_cast<int>(state.range(1));
  MergeData d = make_merge_data(rank);
  for (auto _ : state) run_merge(d, threads);
  Best merge, sgemm, stream, copy;
  for (int i = 0; i < kReps; ++i) {
    merge.time([&] { run_merge(d, threads); });
    sgemm.time([&] { run_sgemm(d, rank, threads); });
    stream.time([&] { run_stream(d, threads); });
    copy.time([&] { run_copy(d, threads); });
  }
  const double bytes = static_cast<double>(kWeights * kRows * kCols * 2);
  const double flops = 2.0 * static_cast<double>(kWeights * kRows * kCols * rank);
  state.counters["threads"] = threads;
  state.counters["blas_threads"] = detail::blas_threads();
  state.counters["cpu_merge_GB_per_s"] = bytes / merge.cpu / 1e9;
  state.counters["cpu_merge_GFLOP_per_s"] = flops / merge.cpu / 1e9;
  state.counters["cpu_sgemm_GFLOP_per_s"] = flops / sgemm.cpu / 1e9;
  state.counters["cpu_stream_GB_per_s"] = bytes / stream.cpu / 1e9;
  state.counters["cpu_copy_GB_per_s"] = bytes / copy.cpu / 1e9;
  state.counters["cpu_ratio_vs_sgemm"] = sgemm.cpu / merge.cpu;
  state.counters["cpu_ratio_vs_stream"] = stream.cpu / merge.cpu;
  state.counters["cpu_ratio_vs_copy"] = copy.cpu / merge.cpu;
  state.counters["wall_merge_GB_per_s"] = bytes / merge.wall / 1e9;
  state.counters["wall_ratio_vs_sgemm"] = sgemm.wall / merge.wall;
  state.counters["wall_ratio_vs_stream"] = stream.wall / merge.wall;
  state.counters["wall_ratio_vs_copy"] = copy.wall / merge.wall;
  state.SetLabel(std::string("OpenBLAS ") + detail::blas_threading());
}
BENCHMARK(BM_MergeKernel)
    ->ArgsProduct({{4, 16, 64}, {1, 0}})  // 0: one thread per core
    ->ArgNames({"rank", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(0.5);

// Memory write bandwidth of one thread: best of several memsets of a buffer far larger than
// the caches (the peer of BM_MergeFile, whose file write is single-threaded).
double memset_bytes_per_second() {
  static const double bw = [] {
    const std::size_t n = std::size_t{256} << 20;
    std::vector<char> buf(n, 1);
    double best = 0;
    for (int i = 0; i < 6; ++i) {
      const double t0 = wall_seconds();
      std::memset(buf.data(), i, n);
      benchmark::ClobberMemory();
      best = std::max(best, static_cast<double>(n) / (wall_seconds() - t0));
    }
    return best;
  }();
  return bw;
}

// Full merge_lora (mmap read, patch, atomic write with fsync) of an 8-weight f16 file.
void BM_MergeFile(benchmark::State& state) {
  const std::int64_t rank = state.range(0);
  const fs::path base = bench_dir() / "merge_base.safetensors";
  const fs::path lora = bench_dir() / ("merge_lora_r" + std::to_string(rank) + ".safetensors");
  const fs::path out = bench_dir() / "merge_out.safetensors";
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> keys, lkeys;
  for (int i = 0; i < 8; ++i) {
    const std::string k = "model.diffusion_model.output_blocks.3.1.transformer_blocks." + std::to_string(i) + ".attn1.to_q";
    keys.push_back({k + ".weight", {1280, 1280}});
    const std::string l = "lora_unet_output_blocks_3_1_transformer_blocks_" + std::to_string(i) + "_attn1_to_q";
    lkeys.push_back({l + ".lora_down.weight", {rank, 1280}});
    lkeys.push_back({l + ".lora_up.weight", {1280, rank}});
  }
  if (!fs::exists(base)) write_random(base, keys, DType::kF16);
  write_random(lora, lkeys, DType::kF16);
  std::uint64_t written = 0;
  for (auto _ : state) written += merge_lora(base, lora, out, 0.8).patched_bytes;
  state.counters["memset_GB_per_s"] = memset_bytes_per_second() / 1e9;
  state.counters["W_written_per_s"] = benchmark::Counter(static_cast<double>(written), benchmark::Counter::kIsRate);
  state.counters["ratio_vs_memset"] =
      benchmark::Counter(static_cast<double>(written) / memset_bytes_per_second(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MergeFile)->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();

struct NormData {
  std::vector<float> up, down;
};
const NormData& norm_data() {
  static const NormData d = [] {
    NormData x;
    std::mt19937 rng(5);
    std::normal_distribution<float> nd;
    x.up.resize(1280 * 16);
    x.down.resize(16 * 1280);
    for (float& v : x.up) v = nd(rng);
    for (float& v : x.down) v = nd(rng);
    return x;
  }();
  return d;
}

void BM_NormTraceIdentity(benchmark::State& state) {
  const NormData& d = norm_data();
  for (auto _ : state) benchmark::DoNotOptimize(lora_delta_norm(d.up.data(), d.down.data(), 1280, 16, 1280));
}
BENCHMARK(BM_NormTraceIdentity)->Unit(benchmark::kMicrosecond);

void BM_NormExplicitProduct(benchmark::State& state) {
  const NormData& d = norm_data();
  std::vector<float> w(1280 * 1280);
  for (auto _ : state) {
    std::fill(w.begin(), w.end(), 0.0f);
    detail::matmul_add(d.up.data(), d.down.data(), w.data(), 1280, 16, 1280, 1.0f);
    double s = 0;
    for (float x : w) s += static_cast<double>(x) * x;
    benchmark::DoNotOptimize(std::sqrt(s));
  }
}
BENCHMARK(BM_NormExplicitProduct)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::error_code ec;
  fs::remove_all(bench_dir(), ec);
  return 0;
}
