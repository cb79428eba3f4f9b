// Format benchmarks, each paired with a peer or a physical limit measured in the same run:
//   * safetensors header validation (SAX, all checks) vs nlohmann::json::parse (DOM only,
//     no checks) of the same LoRA-sized header;
//   * parse_npy (copy; big endian: copy + byte swap) vs memcpy of the same bytes;
//   * write_npy (temp file + fsync + rename + fsync dir) vs a plain write + fsync.
// Compare the bytes_per_second columns of each pair (docs/formats.md has the numbers).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "genscope/npy.hpp"
#include "genscope/safetensors.hpp"

namespace {

using genscope::DType;

// A header shaped like a LoRA file: long kohya-style names, small F16 tensors.
std::vector<std::byte> lora_like_file(int tensors, std::string* header_out) {
  std::string h = "{\"__metadata__\":{\"ss_network_dim\":\"16\"}";
  std::uint64_t off = 0;
  for (int i = 0; i < tensors; ++i) {
    const std::uint64_t nbytes = 16 * 2;
    h += ",\"lora_unet_down_blocks_" + std::to_string(i) +
         "_attentions_0_transformer_blocks_0_attn1_to_q.lora_down.weight\":{\"dtype\":\"F16\","
         "\"shape\":[4,4],\"data_offsets\":[" +
         std::to_string(off) + "," + std::to_string(off + nbytes) + "]}";
    off += nbytes;
  }
  h += "}";
  h.append((8 - h.size() % 8) % 8, ' ');
  std::vector<std::byte> file(8 + h.size() + off);
  for (int i = 0; i < 8; ++i) file[i] = std::byte((h.size() >> (8 * i)) & 0xFF);
  std::memcpy(file.data() + 8, h.data(), h.size());
  *header_out = h;
  return file;
}

void BM_SafetensorsValidate(benchmark::State& state) {
  std::string header;
  const auto file = lora_like_file(static_cast<int>(state.range(0)), &header);
  for (auto _ : state) {
    auto st = genscope::SafetensorsFile::parse(file);
    benchmark::DoNotOptimize(st.entries().data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * header.size()));
}
BENCHMARK(BM_SafetensorsValidate)->Arg(1000)->Arg(10000);

void BM_PeerNlohmannDomParse(benchmark::State& state) {
  std::string header;
  lora_like_file(static_cast<int>(state.range(0)), &header);
  for (auto _ : state) {
    auto j = nlohmann::json::parse(header);
    benchmark::DoNotOptimize(j.size());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * header.size()));
}
BENCHMARK(BM_PeerNlohmannDomParse)->Arg(1000)->Arg(10000);

std::vector<std::byte> npy_image(std::size_t floats, bool big_endian) {
  std::string dict = std::string("{'descr': '") + (big_endian ? ">f4" : "<f4") +
                     "', 'fortran_order': False, 'shape': (" + std::to_string(floats) + ",), }";
  dict.append(64 - (10 + dict.size() + 1) % 64, ' ');
  dict += '\n';
  std::vector<std::byte> out(10 + dict.size() + floats * 4, std::byte{1});
  std::memcpy(out.data(), "\x93NUMPY\x01\x00", 8);
  out[8] = std::byte(dict.size() & 0xFF);
  out[9] = std::byte(dict.size() >> 8);
  std::memcpy(out.data() + 10, dict.data(), dict.size());
  return out;
}

void BM_ParseNpy(benchmark::State& state) {
  const std::size_t floats = 4u << 20;  // 16 MiB
  const auto image = npy_image(floats, state.range(0) != 0);
  for (auto _ : state) {
    auto a = genscope::parse_npy(image);
    benchmark::DoNotOptimize(a.bytes().data());
  }
  state.SetLabel(state.range(0) != 0 ? ">f4 (swap)" : "<f4");
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * floats * 4));
}
BENCHMARK(BM_ParseNpy)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_LimitMemcpy(benchmark::State& state) {
  const std::size_t bytes = 16u << 20;
  std::vector<std::byte> src(bytes, std::byte{1});
  for (auto _ : state) {
    std::vector<std::byte> dst(src.begin(), src.end());  // allocation included, like parse_npy
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_LimitMemcpy)->Unit(benchmark::kMillisecond);

std::filesystem::path bench_dir() {
  const char* env = std::getenv("GENSCOPE_BENCH_TMP");
  auto dir = std::filesystem::path(env ? env : std::filesystem::temp_directory_path().c_str()) /
             "genscope_formats_bench";
  std::filesystem::create_directories(dir);
  return dir;
}

void BM_WriteNpy(benchmark::State& state) {
  const std::size_t floats = 4u << 20;
  std::vector<float> data(floats, 1.f);
  const genscope::TensorView v{data.data(), {static_cast<std::int64_t>(floats)}, {}, DType::kF32};
  const auto path = bench_dir() / "w.npy";
  for (auto _ : state) genscope::write_npy(path, v);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * floats * 4));
}
BENCHMARK(BM_WriteNpy)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_PeerPlainWriteFsync(benchmark::State& state) {
  const std::size_t bytes = 16u << 20;
  std::vector<std::byte> data(bytes, std::byte{1});
  const auto path = bench_dir() / "plain.bin";
  for (auto _ : state) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    benchmark::DoNotOptimize(::write(fd, data.data(), bytes));
    ::fsync(fd);
    ::close(fd);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_PeerPlainWriteFsync)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
