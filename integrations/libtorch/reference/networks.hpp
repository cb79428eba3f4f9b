// The reference networks: functional forward passes over a name -> tensor weight map.
//
// Key names follow the real checkpoints' conventions so LoRA mapping is realistic:
// CLIP-like text encoder ("text_model.encoder.layers.0.self_attn.q_proj.weight"),
// UNet and DiT under "diffusion_model." (kohya LoRA: "lora_unet_<key with . -> _>"),
// VAE under "encoder." / "decoder." (video VAE adds "encoder.time_*" / "decoder.time_*").
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "preset.hpp"

namespace genscope::detail {

/// A state dict: weight name -> tensor (float32, CPU or the compute device).
using Weights = std::map<std::string, at::Tensor>;

/// The weight named `name`; throws genscope::Error("MissingWeight") naming it.
const at::Tensor& weight(const Weights& w, const std::string& name);

/// Builds seeded random weights of each component (fan-in scaled normal init).
Weights make_text_encoder_weights(const Preset& p, std::uint64_t seed);
Weights make_unet_weights(const Preset& p, std::uint64_t seed);
Weights make_image_vae_weights(const Preset& p, std::uint64_t seed);
Weights make_dit_weights(const Preset& p, std::uint64_t seed);
Weights make_video_vae_weights(const Preset& p, std::uint64_t seed);
/// A kohya-format LoRA (lora_down/lora_up/alpha) for every attention projection of
/// `denoiser` (UNet attn1/attn2 to_q/to_k/to_v/to_out.0; DiT self_attn/cross_attn q/k/v/o).
Weights make_lora_weights(const Preset& p, const Weights& denoiser, std::uint64_t seed);
/// True for the denoiser keys the LoRA targets.
bool is_lora_target(const std::string& key);
/// The kohya module name of a denoiser key: "diffusion_model.a.b.weight" -> "lora_unet_a_b".
std::string kohya_module_name(const std::string& key);

/// Byte-level tokenizer: BOS(256), UTF-8 bytes, EOS(257), padded with EOS to 77 tokens.
/// `token_count` receives the number of real tokens (BOS..EOS), `truncated` whether the
/// prompt was cut.
at::Tensor tokenize(std::string_view text, const Preset& p, int& token_count, bool& truncated);
/// (1, 77) int64 tokens -> (1, 77, text_width) context (causal transformer, final norm).
at::Tensor text_encoder_forward(const Weights& w, const Preset& p, const at::Tensor& tokens);

/// epsilon prediction: x (B,4,h,w), t (B) timesteps in [0,1000), context (B,77,D).
at::Tensor unet_forward(const Weights& w, const Preset& p, const at::Tensor& x, const at::Tensor& t,
                        const at::Tensor& context);
/// velocity prediction: x (B,16,T,h,w), cond (B,16,T,h,w) image latent, t (B) in [0,1000].
at::Tensor dit_forward(const Weights& w, const Preset& p, const at::Tensor& x,
                       const at::Tensor& cond, const at::Tensor& t, const at::Tensor& context);

/// Spatial VAE encoder: pixels (N,3,H,W) in [-1,1] -> moments (N,2*zc,H/8,W/8), where zc is
/// the image (4) or video (16) latent channel count.
at::Tensor vae_encode_spatial(const Weights& w, const Preset& p, const at::Tensor& pixels,
                              bool video);
/// Video only: moments per frame (B,2zc,F,h,w) -> causal x4 temporal (B,2zc,1+(F-1)/4,h,w).
at::Tensor vae_encode_temporal(const Weights& w, const at::Tensor& moments);
/// Image: latent (B,4,h,w) -> pixels (B,3,8h,8w). Video: (B,16,T,h,w) -> (B,3,4T-3,8h,8w).
at::Tensor vae_decode(const Weights& w, const Preset& p, const at::Tensor& latent, bool video);

/// The SD1.x latent scale (image VAE); the video VAE uses 1.
inline constexpr double kImageLatentScale = 0.18215;

}  // namespace genscope::detail
