// Step analyses of the reference pipeline.
#include "analysis.hpp"

#include <cctype>
#include <vector>

#include "image_io.hpp"

namespace genscope::detail {

nlohmann::json tensor_summary(const at::Tensor& t, std::string_view role) {
  nlohmann::json j;
  j["role"] = role;
  j["shape"] = std::vector<std::int64_t>(t.sizes().begin(), t.sizes().end());
  j["dtype"] = std::string(c10::toString(t.scalar_type()));
  j["device"] = t.device().str();
  j["numel"] = t.numel();
  j["size_bytes"] = t.numel() * static_cast<std::int64_t>(t.element_size());
  at::Tensor f = t.detach().to(at::kCPU, at::kDouble);
  if (!t.is_cpu()) j["note"] = "statistics computed after a device-to-host copy";
  at::Tensor finite = at::isfinite(f);
  const std::int64_t n_finite = finite.sum().item<std::int64_t>();
  j["nan_count"] = at::isnan(f).sum().item<std::int64_t>();
  j["inf_count"] = at::isinf(f).sum().item<std::int64_t>();
  if (n_finite > 0) {
    at::Tensor v = f.masked_select(finite);
    j["min"] = v.min().item<double>();
    j["max"] = v.max().item<double>();
    j["mean"] = v.mean().item<double>();
    j["std"] = n_finite > 1 ? v.std().item<double>() : 0.0;
    j["abs_mean"] = v.abs().mean().item<double>();
    j["zero_fraction"] = (v == 0).sum().item<double>() / static_cast<double>(f.numel());
  }
  j["valid"] = n_finite == f.numel();
  return j;
}

nlohmann::json conditioning_candidates(const at::Tensor& context) {
  struct Family {
    const char* name;
    std::int64_t width;
    std::int64_t tokens;  // 0 = variable
  };
  static const Family families[] = {
      {"SD1.x (CLIP-L/14)", 768, 77},       {"SD2.x (OpenCLIP-H/14)", 1024, 77},
      {"SDXL base (CLIP-L + bigG)", 2048, 77}, {"SDXL refiner (bigG)", 1280, 77},
      {"SD3/SD3.5 (CLIP + T5-XXL)", 4096, 0}, {"Flux.1 (T5-XXL)", 4096, 0},
      {"Wan 2.x (umT5-XXL)", 4096, 512},    {"Qwen-Image (Qwen2.5-VL)", 3584, 0},
      {"HunyuanVideo (LLaMA)", 4096, 256},  {"LTX-Video (T5-XXL)", 4096, 128},
  };
  nlohmann::json out = nlohmann::json::array();
  if (context.dim() != 3) return out;
  const std::int64_t tokens = context.size(1), width = context.size(2);
  for (const Family& f : families) {
    if (f.width == width && (f.tokens == 0 || f.tokens == tokens || tokens % 77 == 0)) {
      out.push_back(f.name);
    }
  }
  return out;
}

nlohmann::json text_analysis(std::string_view text, int tokens, bool truncated) {
  std::size_t words = 0, special = 0;
  bool in_word = false;
  for (unsigned char c : text) {
    const bool space = std::isspace(c) != 0;
    if (!space && !in_word) ++words;
    in_word = !space;
    if (!space && std::isalnum(c) == 0) ++special;
  }
  return {{"text", text},          {"characters", text.size()}, {"words", words},
          {"special_characters", special}, {"tokens", tokens}, {"truncated", truncated}};
}

nlohmann::json latent_analysis(const at::Tensor& latent, std::int64_t pixel_h,
                               std::int64_t pixel_w, std::int64_t frames) {
  nlohmann::json j = tensor_summary(latent, "latent");
  const bool video = latent.dim() == 5;
  j["latent_kind"] = video ? "video" : (latent.dim() == 4 ? "image" : "unknown");
  j["layout"] = video ? "(B,C,T,H,W)" : "(B,C,H,W)";
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
  at::Tensor c = t.detach().to(at::kCPU, at::kFloat).contiguous();
  write_npy_f32(path, std::span<const float>(c.data_ptr<float>(), static_cast<std::size_t>(c.numel())),
                std::vector<std::int64_t>(c.sizes().begin(), c.sizes().end()));
}

}  // namespace genscope::detail
