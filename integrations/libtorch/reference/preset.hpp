// Shapes of the reference pipeline's presets (tiny, small, large).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace genscope::detail {

/// Every shape the reference components are built with. Weights are seeded per preset.
struct Preset {
  std::string name;
  std::uint64_t weight_seed = 0;
  // Text encoder (CLIP-like, byte-level tokenizer, context 77 x text_width).
  int context_tokens = 77;
  int text_width = 64;
  int text_layers = 2;
  int text_heads = 2;
  // Text-to-image UNet and image VAE.
  int image_size = 64;  ///< Pixels (square).
  int latent_channels = 4;
  int unet_channels = 32;
  std::vector<int> unet_mult = {1, 2};
  int unet_heads = 2;
  int vae_channels = 16;
  // Image-to-video DiT and video VAE (16 latent channels, x4 causal temporal).
  int video_size = 32;
  int video_frames = 9;  ///< 1 + 4k.
  int video_latent_channels = 16;
  int dit_width = 64;
  int dit_layers = 2;
  int dit_heads = 2;
  // Sampling and LoRA.
  int default_steps = 4;
  int lora_rank = 4;
  double lora_alpha = 4.0;
};

/// The preset named `name`; throws genscope::Error("InvalidOption") when unknown.
const Preset& find_preset(std::string_view name);
/// Names of all presets, in size order.
std::vector<std::string> preset_names();
/// True when LibTorch can use a CUDA device (defined with the torch code).
bool torch_cuda_available();

}  // namespace genscope::detail
