// The family table, family names and the classification of conditioning tensors.
#include <algorithm>
#include <array>
#include <cctype>
#include <string>

#include "genscope/tensor_classify.hpp"
#include "tensor/family_table.hpp"

namespace genscope {
namespace detail {
namespace {

using F = ModelFamily;
// Sources: docs/domain.md §1 (conditioning) and §2 (latents).
constexpr std::array<FamilyInfo, 18> kFamilies{{
    {F::kSD1, "SD1.x", "sd1,sd1.x,sd15,sd1.5", 768, "77 per chunk", 0, 4, 8, 0, 0, 0.18215},
    {F::kSD2, "SD2.x", "sd2,sd2.x,sd21,sd2.1", 1024, "77 per chunk", 0, 4, 8, 0, 0,
     0.18215},
    {F::kSDXL, "SDXL", "sdxl", 2048, "77 per chunk", 1280, 4, 8, 0, 0, 0.13025},
    {F::kSDXLRefiner, "SDXL refiner", "sdxl-refiner,refiner", 1280, "77 per chunk", 1280, 4, 8,
     0, 0, 0.13025},
    {F::kSD3, "SD3", "sd3,sd3.5", 4096, "333 (diffusers) or a multiple of 77 >= 154 (ComfyUI)",
     2048, 16, 8, 0, 0, 1.5305},
    {F::kFlux1Dev, "Flux.1-dev", "flux,flux-dev,flux.1-dev,flux1-dev", 4096, "512", 768, 16, 8,
     0, 64, 0.3611},
    {F::kFlux1Schnell, "Flux.1-schnell", "flux-schnell,flux.1-schnell,flux1-schnell", 4096,
     "256", 768, 16, 8, 0, 64, 0.3611},
    {F::kWan21, "Wan 2.x", "wan,wan2.1,wan21,wan-a14b,wan2.2-a14b", 4096, "512", 0, 16, 8, 4,
     0, 0},
    {F::kWan22TI2V, "Wan 2.2 TI2V-5B", "wan-ti2v,wan2.2-ti2v,ti2v-5b", 4096, "512", 0, 48, 16, 4,
     0, 0},
    {F::kQwenImage, "Qwen-Image", "qwen,qwen-image,qwenimage", 3584, "<= 1024", 0, 16, 8, 1,
     64, 0},
    {F::kHunyuanVideo, "HunyuanVideo", "hunyuan,hunyuanvideo,hunyuan-video", 4096, "256", 768,
     16, 8, 4, 0, 0.476986},
    {F::kLtxVideo, "LTX-Video", "ltx,ltxv,ltx-video", 4096, "128", 0, 128, 32, 8, 128, 0},
    // Mistral-Small-3.1 hidden states of layers 10, 20, 30 side by side: 3 x 5120.
    {F::kFlux2, "Flux.2", "flux2,flux.2,flux2-dev,flux.2-dev", 15360, "512", 0, 32, 8, 0, 128, 0},
    // Qwen3-4B / Qwen3-8B hidden states of layers 9, 18, 27: 3 x 2560 / 3 x 4096.
    {F::kFlux2Klein4B, "Flux.2 Klein 4B", "flux2-klein-4b,flux.2-klein-4b,klein-4b", 7680, "512",
     0, 32, 8, 0, 128, 0},
    {F::kFlux2Klein9B, "Flux.2 Klein 9B", "flux2-klein-9b,flux.2-klein-9b,klein-9b", 12288,
     "512", 0, 32, 8, 0, 128, 0},
    // Qwen2.5-VL-7B hidden states, 1000 tokens after the template; 32-channel x16 video VAE.
    {F::kHunyuanVideo15, "HunyuanVideo 1.5", "hunyuanvideo1.5,hunyuanvideo-1.5,hunyuan1.5", 3584,
     "1000", 0, 32, 16, 4, 0, 0},
    // LTX-2.0 (audio + video): Gemma-3-12B's 49 hidden states (3840 x 49) through the text
    // connectors to 3840, the same context for the video and the audio stream; the LTX video
    // VAE's 128 channels (32 x 8) as LTX-Video's, in 1x1x1-patch tokens.
    {F::kLtx2, "LTX-2", "ltx2.0,ltx-2.0", 3840, "<= 1024", 0, 128, 32, 8, 128, 0, 3840},
    // LTX-2.3: the connectors project Gemma 3's hidden states per modality: a 4096-wide video
    // context, a 2048-wide audio context; LTX-2.0's VAE and tokens.
    {F::kLtx23, "LTX-2.3", "ltx2.3,ltx-2.3", 4096, "<= 1024", 0, 128, 32, 8, 128, 0, 2048},
}};

constexpr std::array kWan22{F::kWan21, F::kWan22TI2V};
constexpr std::array kKlein{F::kFlux2Klein4B, F::kFlux2Klein9B};
constexpr std::array kLtx2Series{F::kLtx2, F::kLtx23};
constexpr std::array<FamilyAlias, 3> kAliases{{
    {"wan2.2,wan22", kWan22},
    {"flux2-klein,flux.2-klein,klein", kKlein},
    {"ltx2,ltx-2", kLtx2Series},  // the series: LTX-2.0 or LTX-2.3, as the tensors show
}};

// Whether `key` is one of the comma-separated `ids`.
bool listed(std::string_view ids, std::string_view key) {
  while (!ids.empty()) {
    const std::size_t comma = ids.find(',');
    if (ids.substr(0, comma) == key) return true;
    ids = comma == std::string_view::npos ? std::string_view{} : ids.substr(comma + 1);
  }
  return false;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Whether a context of `tokens` rows fits the family's sequence-length rule.
bool tokens_fit(ModelFamily f, std::int64_t tokens) {
  switch (f) {
    case F::kSD1:
    case F::kSD2:
    case F::kSDXL:
    case F::kSDXLRefiner: return tokens > 0 && tokens % 77 == 0;
    case F::kSD3: return tokens == 333 || (tokens >= 154 && tokens % 77 == 0);
    case F::kFlux1Dev:
    case F::kWan21: return tokens == 512;
    case F::kFlux1Schnell:
    case F::kHunyuanVideo: return tokens == 256;
    case F::kLtxVideo: return tokens == 128;
    case F::kQwenImage:
    case F::kLtx2:
    case F::kLtx23: return tokens >= 1 && tokens <= 1024;
    case F::kFlux2:
    case F::kFlux2Klein4B:
    case F::kFlux2Klein9B: return tokens == 512;
    case F::kHunyuanVideo15: return tokens == 1000;
    case F::kWan22TI2V: return false;  // same encoder as Wan 2.x: reported as "Wan 2.x"
  }
  return false;
}

}  // namespace

std::span<const FamilyInfo> family_table() noexcept { return kFamilies; }
std::span<const FamilyAlias> family_aliases() noexcept { return kAliases; }
const FamilyInfo& family_info(ModelFamily family) noexcept {
  return kFamilies[static_cast<std::size_t>(family)];
}

}  // namespace detail

std::string_view family_name(ModelFamily family) noexcept {
  return detail::family_info(family).name;
}

std::vector<ModelFamily> families_named(std::string_view name) {
  const std::string key = detail::lower(name);
  // Aliases first: "ltx-2" is the series (LTX-2.0 or LTX-2.3), though LTX-2.0's display name.
  for (const detail::FamilyAlias& a : detail::family_aliases()) {
    if (detail::listed(a.ids, key)) return {a.families.begin(), a.families.end()};
  }
  for (const detail::FamilyInfo& f : detail::family_table()) {
    if (detail::lower(f.name) == key || detail::listed(f.ids, key)) return {f.family};
  }
  return {};
}

std::optional<ModelFamily> parse_family(std::string_view name) noexcept {
  try {
    const std::vector<ModelFamily> all = families_named(name);
    if (!all.empty()) return all.front();
  } catch (...) {
  }
  return std::nullopt;
}

std::int64_t context_width(ModelFamily family) noexcept {
  return detail::family_info(family).context_width;
}

std::int64_t audio_context_width(ModelFamily family) noexcept {
  return detail::family_info(family).audio_width;
}

ConditioningClassification classify_conditioning(
    std::span<const std::int64_t> shape, std::optional<std::vector<std::int64_t>> pooled_shape) {
  ConditioningClassification out;
  if (shape.empty()) {
    out.role = "unknown";
    out.notes.push_back("a scalar is not a conditioning tensor");
    return out;
  }
  out.width = shape.back();
  const std::string w = std::to_string(out.width);
  if (shape.size() == 2) {
    // (B, W): a pooled vector, or an ADM vector (pooled ++ size embeddings) of SDXL.
    out.role = "pooled";
    for (const detail::FamilyInfo& f : detail::family_table()) {
      if (f.pooled_width == out.width) {
        out.candidates.push_back({f.family, "pooled width " + w});
      }
    }
    if (out.width == 2816) out.candidates.push_back({ModelFamily::kSDXL, "ADM vector 2816 = 1280 + 6x256"});
    if (out.width == 2560) {
      out.candidates.push_back({ModelFamily::kSDXLRefiner, "ADM vector 2560 = 1280 + 5x256"});
    }
    if (out.width == 768) out.notes.push_back("CLIP-L pooled 768 is shared by Flux.1-dev/schnell and HunyuanVideo");
    if (out.width == 2048) out.notes.push_back("2048 as a rank-2 vector is SD3's pooled (CLIP-L 768 + CLIP-G 1280), not SDXL context");
    return out;
  }
  if (shape.size() != 3) {
    out.role = "unknown";
    out.notes.push_back("expected (B, tokens, width) or (B, width), got rank " +
                        std::to_string(shape.size()));
    return out;
  }
  out.role = "context";
  out.tokens = shape[1];
  std::vector<FamilyCandidate> by_width;
  for (const detail::FamilyInfo& f : detail::family_table()) {
    if (f.context_width != out.width || f.family == ModelFamily::kWan22TI2V) continue;
    if (!detail::tokens_fit(f.family, out.tokens)) continue;
    by_width.push_back({f.family, "context " + std::to_string(out.tokens) + " x " + w +
                                      " (expects width " + w + ", tokens " +
                                      std::string(f.tokens) + ")"});
  }
  if (by_width.empty()) {
    for (const detail::FamilyInfo& f : detail::family_table()) {
      if (f.context_width == out.width && f.family != ModelFamily::kWan22TI2V) {
        out.notes.push_back(std::string(f.name) + " has width " + w + " but tokens " +
                            std::string(f.tokens) + ", not " + std::to_string(out.tokens));
      }
    }
  }
  if (pooled_shape && !pooled_shape->empty()) {
    const std::int64_t pw = pooled_shape->back();
    std::vector<FamilyCandidate> kept;
    for (FamilyCandidate c : by_width) {
      if (detail::family_info(c.family).pooled_width == pw) {
        c.reason += "; pooled companion width " + std::to_string(pw);
        kept.push_back(std::move(c));
      }
    }
    if (kept.empty() && !by_width.empty()) {
      out.notes.push_back("pooled width " + std::to_string(pw) +
                          " fits none of the context candidates");
    } else {
      by_width = std::move(kept);
    }
  }
  out.candidates = std::move(by_width);
  if (out.width == 4096 && out.candidates.size() > 1) {
    out.notes.push_back("width 4096 (T5-XXL class) is shared by SD3, Flux, Wan, HunyuanVideo, LTX-Video and LTX-2.3's video context; a pooled companion, the sequence length, the latents or an audio context narrow it");
  }
  for (const FamilyCandidate& c : out.candidates) {
    if (c.family == ModelFamily::kWan21) {
      out.notes.push_back("Wan 2.x covers Wan 2.1 and both Wan 2.2 models (same umT5-XXL encoder; real tokens are followed by zero rows)");
    }
  }
  if (out.width == 1280) out.notes.push_back("1280 is SDXL refiner context or SDXL pooled");
  if (out.candidates.empty()) out.notes.push_back("no known family has context width " + w);
  return out;
}

}  // namespace genscope
