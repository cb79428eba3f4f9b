// Analyses the reference pipeline attaches to its steps: tensor statistics, conditioning
// family candidates (domain.md table 1), latent layout and compression (table 2), text.
#pragma once

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace genscope::detail {

/// Shape, dtype, device, size_bytes, numel and min/max/mean/std, NaN/Inf counts.
/// A CUDA tensor is summarised after a device-to-host copy (noted in the result).
nlohmann::json tensor_summary(const at::Tensor& t, std::string_view role);

/// Conditioning families whose context matches (tokens x width) per domain.md table 1.
nlohmann::json conditioning_candidates(const at::Tensor& context);

/// Prompt characteristics: characters, words, special characters, tokens, truncation.
nlohmann::json text_analysis(std::string_view text, int tokens, bool truncated);

/// Latent kind (image/video), layout, spatial and temporal compression ratios.
nlohmann::json latent_analysis(const at::Tensor& latent, std::int64_t pixel_h,
                               std::int64_t pixel_w, std::int64_t frames);

/// Writes a float32 .npy dump of `t` (copied to host, contiguous).
void dump_npy(const std::string& path, const at::Tensor& t);

}  // namespace genscope::detail
