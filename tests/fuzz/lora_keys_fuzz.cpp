// libFuzzer target for the LoRA key parsers (src/lora): module grouping, architecture
// detection, UNet structure detection, the generated ldm<->diffusers map and the ComfyUI key
// map, fed with the tensor names of a safetensors header (when the bytes parse as one) or
// else with the input's lines; with a parsed header also both loaders' maps over its shapes
// (model detection, row windows, text towers). Invariants: no crash, every key lands in
// exactly one module role or in the unknown list, every generated diffusers name maps to an
// ldm name, targets name a key and non-negative windows.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "genscope/lora.hpp"
#include "genscope/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace genscope;
  std::vector<std::string> keys;
  try {
    const SafetensorsFile f = SafetensorsFile::parse(std::as_bytes(std::span<const std::uint8_t>(data, size)));
    for (const auto& e : f.entries()) keys.push_back(e.name);
    for (const LoraLoader loader : {LoraLoader::kComfyUI, LoraLoader::kDiffusers}) {
      for (const auto& [name, target] : lora_key_map(f, loader)) {
        if (target.key.empty() || target.row_offset < 0 || target.rows < 0) __builtin_trap();
      }
    }
  } catch (const Error&) {
    std::string line;
    for (std::size_t i = 0; i < size && keys.size() < 4096; ++i) {
      if (data[i] == '\n') {
        keys.push_back(line);
        line.clear();
      } else {
        line.push_back(static_cast<char>(data[i]));
      }
    }
    keys.push_back(line);
  }
  std::vector<std::string> unknown;
  const auto modules = group_lora_keys(keys, &unknown);
  std::size_t roles = 0;
  std::vector<std::string> names;
  for (const auto& m : modules) {
    roles += m.tensors.size();
    names.push_back(m.name);
  }
  // Duplicate keys collapse into one role, so roles + unknown never exceeds the key count.
  if (roles + unknown.size() > keys.size()) __builtin_trap();
  std::string evidence;
  (void)detect_lora_arch(names, &evidence);
  (void)detect_model_arch(keys);
  if (const auto config = unet_config_from_keys(keys)) {
    for (const auto& [d, l] : unet_to_diffusers(*config)) {
      if (d.empty() || l.empty()) __builtin_trap();
    }
  }
  for (const auto& [name, target] : lora_key_map(keys)) {
    if (target.chunks < 1 || target.chunk < 0 || target.chunk >= target.chunks) __builtin_trap();
  }
  return 0;
}
