// Generation and loading of the reference components' safetensors files.
#include "component_store.hpp"

#include <chrono>
#include <cstring>
#include <map>
#include <vector>

#include "genscope/error.hpp"
#include "genscope/safetensors.hpp"

namespace genscope::detail {
namespace {

constexpr const char* kFormatVersion = "1";

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool matches(const SafetensorsFile& file, const std::string& component, const Preset& preset) {
  const auto& md = file.metadata();
  auto get = [&](const char* key) {
    auto it = md.find(key);
    return it == md.end() ? std::string() : it->second;
  };
  return get("genscope.reference") == kFormatVersion && get("preset") == preset.name &&
         get("component") == component;
}

Weights to_weights(const SafetensorsFile& file) {
  Weights weights;
  for (const SafetensorsEntry& e : file.entries()) {
    if (e.dtype != DType::kF32) {
      throw Error("UnexpectedDType", "tensor '" + e.name + "' is " +
                                         std::string(dtype_name(e.dtype)) + ", expected F32");
    }
    at::Tensor t = at::empty(e.shape, at::kFloat);
    const auto bytes = file.bytes(e);
    // The data section need not be 4-byte aligned: copy bytes, never reinterpret in place.
    std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
    weights.emplace(e.name, std::move(t));
  }
  return weights;
}

}  // namespace

void save_weights(const std::filesystem::path& path, const Weights& weights,
                  const std::string& component, const Preset& preset) {
  std::vector<SafetensorsSource> sources;
  sources.reserve(weights.size());
  for (const auto& [name, tensor] : weights) {
    at::Tensor t = tensor.to(at::kFloat).contiguous().cpu();
    SafetensorsSource s;
    s.name = name;
    s.dtype = DType::kF32;
    s.shape.assign(t.sizes().begin(), t.sizes().end());
    s.fill = [t](std::span<std::byte> out) { std::memcpy(out.data(), t.data_ptr(), out.size()); };
    sources.push_back(std::move(s));
  }
  const std::map<std::string, std::string> metadata = {
      {"genscope.reference", kFormatVersion},
      {"preset", preset.name},
      {"component", component},
      {"format", "pt"},
  };
  write_safetensors(path, sources, metadata);
}

Weights read_weights(const std::filesystem::path& path) {
  return to_weights(SafetensorsFile::open(path));
}

LoadedComponent load_component(const std::filesystem::path& dir, const std::string& component,
                               const Preset& preset, const std::function<Weights()>& make) {
  LoadedComponent out;
  out.file = dir / (component + ".safetensors");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw Error("CacheNotWritable",
                "cannot create the reference cache '" + dir.string() + "': " + ec.message());
  }
  bool usable = false;
  if (std::filesystem::exists(out.file, ec)) {
    try {
      usable = matches(SafetensorsFile::open(out.file), component, preset);
    } catch (const Error&) {
      usable = false;  // A damaged or foreign cache file is regenerated below.
    }
  }
  if (!usable) {
    const std::int64_t t0 = now_ns();
    save_weights(out.file, make(), component, preset);
    out.generated = true;
    out.generate_ns = now_ns() - t0;
  }
  const std::int64_t t0 = now_ns();
  SafetensorsFile file = SafetensorsFile::open(out.file);
  out.weights = to_weights(file);
  out.read_ns = now_ns() - t0;
  out.file_size_bytes = file.file_size();
  out.tensors = file.entries().size();
  for (const auto& [name, t] : out.weights) out.parameters += t.numel();
  return out;
}

}  // namespace genscope::detail
