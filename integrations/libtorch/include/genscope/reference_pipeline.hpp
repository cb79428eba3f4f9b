// The reference latent-diffusion pipeline behind `genscope demo`.
//
// A small but real pipeline with seeded random weights: a byte-level text encoder, a UNet
// (text-to-image) or a DiT (image-to-video) denoiser, a VAE (÷8 spatial; ×4 causal temporal
// for video) and a kohya-format LoRA. Components are generated once into
// $XDG_CACHE_HOME/genscope/reference/<preset>/ and loaded through genscope's safetensors
// reader. Every phase is a genscope step with the analyses described in docs/demo.md.
// This header does not include LibTorch, so callers (the CLI, tests) compile fast.
//
// Example:
//   genscope::Monitor monitor;
//   genscope::DemoOptions options{.preset = "tiny", .out_dir = "out"};
//   genscope::validate_demo_options(options);
//   genscope::DemoResult result = genscope::run_reference_pipeline(options, monitor);
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "genscope/monitor.hpp"
#include "genscope/run.hpp"

namespace genscope {

/// What `genscope demo` runs.
struct DemoOptions {
  std::string mode = "t2i";      ///< "t2i" (UNet, Euler eps) or "i2v" (DiT, flow matching).
  std::string preset = "small";  ///< "tiny", "small" or "large".
  int steps = 0;                 ///< Sampling steps; 0 = the preset default.
  std::uint64_t seed = 42;       ///< Seeds the noise (weights are seeded per preset).
  std::string prompt = "a lighthouse on a cliff at sunset, oil painting";
  std::string negative = "blurry, low quality";
  double guidance = 5.0;       ///< Classifier-free guidance scale.
  double lora_strength = 1.0;  ///< 0 keeps the denoiser's weights bit-identical.
  /// Device-memory budget in bytes for the VAE encode chain; 0 = unlimited. Strategies
  /// whose estimated peak exceeds it refuse like an out-of-memory error.
  std::int64_t memory_budget_bytes = 0;
  std::filesystem::path out_dir = "genscope-demo";
  std::string device = "cpu";  ///< "cpu" or "cuda".
  int threads = 1;  ///< Intra-op threads (fixed, for identical output bytes; 1 is robust on a
                    ///< loaded machine).
  bool write_dumps = true;  ///< Write conditioning/latent .npy dumps to out_dir/dumps.
  /// Weight cache folder; empty = $XDG_CACHE_HOME/genscope/reference (fallback ~/.cache).
  std::filesystem::path cache_dir;
};

/// What a pipeline run produced.
struct DemoResult {
  Run run;                                    ///< The finished run (empty when disabled).
  std::vector<std::filesystem::path> images;  ///< PNG files (one per video frame for i2v).
  std::string output_hash;                    ///< XXH3-64 (hex) over the PNG files' bytes.
  std::vector<std::int64_t> latent_shape;     ///< Shape of the sampled latent.
  std::string encode_strategy;                ///< VAE encode strategy that succeeded.
  /// Empty on success; else "<ErrorName>: message" of the failure that ended the pipeline
  /// (the run is still returned, with the failed step recorded).
  std::string error;
};

/// Checks options before any work: mode, preset, steps, strength, device, and that
/// out_dir can be created and written. Throws genscope::Error ("InvalidOption",
/// "OutputNotWritable", "DeviceUnavailable").
void validate_demo_options(const DemoOptions& options);

/// Runs the whole pipeline under `monitor` and writes images (and dumps) to out_dir.
/// Does not write run.json (the caller does, e.g. with write_run_file). Invalid options
/// throw (see validate_demo_options); a failure during the pipeline is returned in
/// DemoResult::error together with the run recorded up to that point.
DemoResult run_reference_pipeline(const DemoOptions& options, Monitor& monitor);

/// Adds the LibTorch allocator probes `options` needs (the CUDA caching allocator when
/// device is "cuda"); call once per monitor, before run_reference_pipeline. Returns the
/// number of probes added.
int add_reference_probes(Monitor& monitor, const DemoOptions& options);

/// Parses a size such as "512M", "1.5GiB", "2G", "4096" (bytes). Throws
/// genscope::Error("InvalidSize").
std::int64_t parse_memory_size(std::string_view text);

/// The folder the components of `preset` are cached in.
std::filesystem::path reference_cache_dir(const DemoOptions& options);

}  // namespace genscope
