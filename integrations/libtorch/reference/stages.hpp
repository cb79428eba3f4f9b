// The compute stages of the reference pipeline (encode chain, samplers, decode, images),
// kept apart from the monitoring glue in pipeline.cpp.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "genscope/step.hpp"
#include "networks.hpp"

namespace genscope::detail {

/// What the VAE encode chain needs.
struct EncodeRequest {
  const Weights* vae = nullptr;
  const Preset* preset = nullptr;
  at::Tensor frames;  ///< (F, 3, H, W) in [-1, 1] on the compute device.
  bool video = false;
  std::int64_t budget_bytes = 0;  ///< Device-memory budget; 0 = unlimited.
  at::Device device = at::kCPU;
};

/// The chain's outcome.
struct EncodeResult {
  at::Tensor latent;       ///< (1,4,h,w) scaled, or (1,16,T,h,w).
  std::string strategy;    ///< "direct", "tiled", "cpu_fallback" or "emergency_zeros".
  nlohmann::json details;  ///< Estimates, tile size, budget.
};

/// Runs the four strategies in order (direct, tiled, CPU fallback, emergency zero latents),
/// each recorded as an attempt on `step`; the first that succeeds wins.
EncodeResult encode_with_fallbacks(const EncodeRequest& request, Step& step);

/// Estimated activation peak of the spatial VAE encoder on `frames` frames of h x w.
std::int64_t estimate_encode_bytes(const Preset& p, std::int64_t frames, std::int64_t h,
                                   std::int64_t w);

/// A deterministic synthetic init image (1,3,H,W) in [-1,1] (gradients and rings).
at::Tensor synthetic_image(std::int64_t h, std::int64_t w);

/// Sampling inputs shared by both modes.
struct SampleRequest {
  const Weights* denoiser = nullptr;
  const Preset* preset = nullptr;
  at::Tensor positive;  ///< (1,77,D)
  at::Tensor negative;  ///< (1,77,D)
  at::Tensor init_latent;
  int steps = 20;
  double guidance = 5.0;
  std::uint64_t seed = 0;
  at::Device device = at::kCPU;
};

/// Text-to-image: Euler over the SD epsilon schedule (scaled-linear betas 0.00085..0.012,
/// 1000 steps), CFG with the negative prompt; one step.mark_iteration() per step.
at::Tensor sample_euler_eps(const SampleRequest& r, Step& step);
/// Image-to-video: flow-matching Euler (sigmas 1 -> 0, shift 5), image latent concatenated
/// to the noisy latent, CFG; one step.mark_iteration() per step.
at::Tensor sample_flow_euler(const SampleRequest& r, Step& step);

/// Decoded pixels (1,3,H,W) or (1,3,F,H,W) in [-1,1] -> 8-bit RGB frames (HWC).
std::vector<std::vector<std::uint8_t>> to_rgb8_frames(const at::Tensor& pixels);

}  // namespace genscope::detail
