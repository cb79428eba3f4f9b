// libFuzzer target for the LoRA delta math (src/lora/lora_delta.cpp): a safetensors file of
// LoRA factors with any shapes and values is opened, every module validated, and every module
// that validates has its delta formed and applied (weight patch at strength 0.5 onto a zero
// weight of its delta shape; bias patch onto a zero bias). Invariants: no crash, no memory
// error; delta() returns numel(delta_shape) values; malformed factors end in genscope::Error.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "genscope/error.hpp"
#include "genscope/lora.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace genscope;
  static const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("genscope_lora_delta_fuzz_" + std::to_string(::getpid()));
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  std::shared_ptr<const LoraFile> lora;
  try {
    lora = LoraFile::open(path, true);
  } catch (const Error&) {
    return 0;
  }
  int budget = 64;
  for (const LoraModule& m : lora->modules()) {
    if (--budget < 0) break;
    try {
      lora->validate(m);
    } catch (const Error&) {
      continue;
    }
    const std::int64_t n = std::accumulate(m.delta_shape.begin(), m.delta_shape.end(), std::int64_t{1},
                                           std::multiplies<>());
    if (!m.delta_shape.empty() && n <= (std::int64_t{1} << 20)) {
      try {
        const std::vector<float> d = lora->delta(m);
        if (d.size() != static_cast<std::size_t>(n)) __builtin_trap();
      } catch (const Error&) {
      }
      try {
        std::vector<float> w(static_cast<std::size_t>(n), 0.0f);
        lora->patch_weight(m, 0.5, w, m.delta_shape);
      } catch (const Error&) {
      }
    }
    for (const char* role : {"diff_b", "b_norm"}) {
      const auto it = m.tensors.find(role);
      if (it == m.tensors.end()) continue;
      const SafetensorsEntry* e = lora->file().find(it->second);
      const std::int64_t b = std::accumulate(e->shape.begin(), e->shape.end(), std::int64_t{1}, std::multiplies<>());
      if (b > (std::int64_t{1} << 20)) continue;
      try {
        std::vector<float> bias(static_cast<std::size_t>(b), 0.0f);
        lora->patch_bias(m, 0.5, bias);
      } catch (const Error&) {
      }
    }
  }
  return 0;
}
