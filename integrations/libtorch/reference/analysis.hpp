// Analyses the reference pipeline attaches to its steps, built on genscope's tensor and
// text analysis (tensor_analysis.hpp, text_analysis.hpp) through the LibTorch adapter.
#pragma once

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "genscope/tensor_analysis.hpp"

namespace genscope::detail {

/// genscope's tensor analysis of an at::Tensor (statistics, classification, flags,
/// checks); a CUDA tensor is analysed after a device-to-host copy, noted in "note".
nlohmann::json tensor_analysis(const at::Tensor& t, TensorRole role,
                               const AnalysisOptions& options = {});

/// Seed 001's latent figures on top of the tensor analysis: latent kind (image/video),
/// layout, spatial and temporal compression ratios, size and element count.
nlohmann::json latent_analysis(const at::Tensor& latent, std::int64_t pixel_h, std::int64_t pixel_w,
                               std::int64_t frames);

/// Writes a float32 .npy dump of `t` (copied to host, contiguous).
void dump_npy(const std::string& path, const at::Tensor& t);

}  // namespace genscope::detail
