// Validation of DemoOptions, memory-size parsing and the cache folder.
#include <cmath>
#include <cstdlib>
#include <fstream>

#include "genscope/error.hpp"
#include "genscope/reference_pipeline.hpp"
#include "preset.hpp"

namespace genscope {

std::int64_t parse_memory_size(std::string_view text) {
  std::string s(text);
  char* end = nullptr;
  const double value = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !(value >= 0) || !std::isfinite(value)) {
    throw Error("InvalidSize", "'" + s + "' is not a size (examples: 512M, 1.5GiB, 4096)");
  }
  std::string unit(end);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double mult = 1;
  if (unit.empty() || unit == "B")
    mult = 1;
  else if (unit == "K" || unit == "KB" || unit == "KIB")
    mult = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MIB")
    mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GIB")
    mult = 1024.0 * 1024 * 1024;
  else
    throw Error("InvalidSize", "'" + s + "' has an unknown unit (use K, M or G)");
  return static_cast<std::int64_t>(std::llround(value * mult));
}

std::filesystem::path reference_cache_dir(const DemoOptions& options) {
  std::filesystem::path base = options.cache_dir;
  if (base.empty()) {
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
      base = std::filesystem::path(xdg) / "genscope" / "reference";
    } else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
      base = std::filesystem::path(home) / ".cache" / "genscope" / "reference";
    } else {
      base = std::filesystem::temp_directory_path() / "genscope" / "reference";
    }
  }
  return base / options.preset;
}

void validate_demo_options(const DemoOptions& o) {
  if (o.mode != "t2i" && o.mode != "i2v") {
    throw Error("InvalidOption", "--mode must be t2i or i2v, got '" + o.mode + "'");
  }
  detail::find_preset(o.preset);
  if (o.steps < 0 || o.steps > 1000) {
    throw Error("InvalidOption",
                "--steps must be between 1 and 1000, got " + std::to_string(o.steps));
  }
  if (!std::isfinite(o.lora_strength) || std::abs(o.lora_strength) > 10.0) {
    throw Error("InvalidOption", "--lora-strength must be a finite number in [-10, 10]");
  }
  if (!std::isfinite(o.guidance) || o.guidance < 0 || o.guidance > 50) {
    throw Error("InvalidOption", "guidance must be in [0, 50]");
  }
  if (o.memory_budget_bytes < 0) throw Error("InvalidOption", "--memory-budget must be >= 0");
  if (o.threads < 1 || o.threads > 256) throw Error("InvalidOption", "threads must be in [1, 256]");
  if (o.device != "cpu" && o.device != "cuda") {
    throw Error("InvalidOption", "--device must be cpu or cuda, got '" + o.device + "'");
  }
  if (o.device == "cuda" && !detail::torch_cuda_available()) {
    throw Error("DeviceUnavailable", "--device cuda: this LibTorch has no usable CUDA device");
  }
  // The output folder must be creatable and writable before any work starts.
  std::error_code ec;
  std::filesystem::create_directories(o.out_dir, ec);
  if (ec || !std::filesystem::is_directory(o.out_dir)) {
    throw Error("OutputNotWritable", "cannot create the output folder '" + o.out_dir.string() +
                                         "'" + (ec ? ": " + ec.message() : std::string()));
  }
  const std::filesystem::path probe = o.out_dir / ".genscope-write-test";
  {
    std::ofstream f(probe);
    f << "ok";
    if (!f) {
      throw Error("OutputNotWritable",
                  "cannot write into the output folder '" + o.out_dir.string() + "'");
    }
  }
  std::filesystem::remove(probe, ec);
}

}  // namespace genscope
