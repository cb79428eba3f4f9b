// Step analyses of the reference pipeline.
#include "analysis.hpp"

#include <vector>

#include "genscope/npy.hpp"
#include "genscope/torch.hpp"

namespace genscope::detail {

nlohmann::json tensor_analysis(const at::Tensor& t, TensorRole role,
                               const AnalysisOptions& options) {
  // The pipeline computes in float32; the analysis kernels read the tensor where it lies.
  const TorchTensorView v = to_view(t.detach());
  nlohmann::json j = tensor_analysis_json(v.view, role, options);
  if (v.copied_to_host) j["note"] = v.note;
  return j;
}

nlohmann::json latent_analysis(const at::Tensor& latent, std::int64_t pixel_h, std::int64_t pixel_w,
                               std::int64_t frames) {
  AnalysisOptions options;
  options.source = {pixel_h, pixel_w, frames};
  nlohmann::json j = tensor_analysis(latent, TensorRole::kLatent, options);
  const bool video = latent.dim() == 5;
  j["latent_kind"] = video ? "video" : (latent.dim() == 4 ? "image" : "unknown");
  j["latent_layout"] = video ? "(B,C,T,H,W)" : "(B,C,H,W)";
  j["size_bytes"] = latent.numel() * static_cast<std::int64_t>(latent.element_size());
  j["numel"] = latent.numel();
  const std::int64_t h = latent.size(-2), w = latent.size(-1);
  j["spatial_compression"] = static_cast<double>(pixel_h * pixel_w) / static_cast<double>(h * w);
  if (video) {
    j["latent_frames"] = latent.size(2);
    j["input_frames"] = frames;
    j["temporal_compression"] = static_cast<double>(frames) / static_cast<double>(latent.size(2));
  }
  return j;
}

void dump_npy(const std::string& path, const at::Tensor& t) {
  write_npy(path, to_view(t.detach().contiguous()).view);
}

}  // namespace genscope::detail
