// Latent classification, health flags and validation checks.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "genscope/tensor_classify.hpp"
#include "tensor/family_table.hpp"

namespace genscope {
namespace {

bool is_video_family(const detail::FamilyInfo& f) { return f.temporal_factor != 0; }

// The side of a packed token's patch in latent pixels: 2 when 64 = 16 channels x 2 x 2.
int packed_patch(const detail::FamilyInfo& f) {
  return f.packed_width == 4 * f.latent_channels ? 2 : 1;
}

std::string fmt_ratio(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", r);
  return buf;
}

// Adds the "latent_size" check of one candidate; true when the latent has the expected size.
bool check_size(const detail::FamilyInfo& f, const LatentClassification& c,
                const SourceSize& src, std::vector<ValidationCheck>& checks) {
  const std::int64_t h = src.height / f.spatial_factor;
  const std::int64_t w = src.width / f.spatial_factor;
  std::string expected;
  bool ok = true;
  if (c.layout == LatentLayout::kPacked) {
    // Patches of p x p latent pixels: 2 for Flux/Qwen-Image (64 = 16 channels x 2 x 2), 1 for
    // LTX (128 channels); LTX's tokens also run over the latent frames.
    const int f_px = f.spatial_factor * packed_patch(f);
    const bool frames = f.temporal_factor > 1 && src.frames > 0;
    const std::int64_t t = frames ? expected_latent_frames(f.family, src.frames) : 1;
    const std::int64_t n = t * (src.height / f_px) * (src.width / f_px);
    ok = c.tokens == n;
    expected = std::to_string(n) + " tokens (" + (frames ? std::to_string(t) + " latent frames x " : "") +
               "(H/" + std::to_string(f_px) + ")(W/" + std::to_string(f_px) + "))";
  } else {
    ok = c.height == h && c.width == w;
    expected = std::to_string(h) + "x" + std::to_string(w) + " (H/" +
               std::to_string(f.spatial_factor) + ", W/" + std::to_string(f.spatial_factor) + ")";
    if (c.layout == LatentLayout::kVideo && src.frames > 0) {
      const std::int64_t t = expected_latent_frames(f.family, src.frames);
      ok = ok && c.frames == t;
      expected += ", " + std::to_string(t) + " latent frames";
    }
  }
  checks.push_back({"latent_size", ok,
                    std::string(f.name) + " expects " + expected + (ok ? "" : ": mismatch")});
  return ok;
}

}  // namespace

std::string_view layout_name(LatentLayout layout) noexcept {
  switch (layout) {
    case LatentLayout::kImage: return "image (B,C,H,W)";
    case LatentLayout::kVideo: return "video (B,C,T,H,W)";
    case LatentLayout::kPacked: return "packed tokens (B,N,C)";
    case LatentLayout::kUnknown: break;
  }
  return "unknown";
}

std::int64_t expected_latent_frames(ModelFamily family, std::int64_t frames) noexcept {
  if (frames <= 0) return 0;
  switch (detail::family_info(family).temporal_factor) {
    case 4: return (frames + 3) / 4;
    case 8: return (frames + 7) / 8;
    default: return 1;
  }
}
int spatial_factor(ModelFamily family) noexcept {
  return detail::family_info(family).spatial_factor;
}
int latent_channels(ModelFamily family) noexcept {
  return detail::family_info(family).latent_channels;
}

LatentClassification classify_latent(std::span<const std::int64_t> shape,
                                     const SourceSize& source) {
  LatentClassification c;
  if (shape.size() == 4) {
    c.layout = LatentLayout::kImage;
    c.batch = shape[0], c.channels = shape[1], c.height = shape[2], c.width = shape[3];
  } else if (shape.size() == 5) {
    c.layout = LatentLayout::kVideo;
    c.batch = shape[0], c.channels = shape[1], c.frames = shape[2];
    c.height = shape[3], c.width = shape[4];
  } else if (shape.size() == 3 && (shape[2] == 64 || shape[2] == 128)) {
    c.layout = LatentLayout::kPacked;
    c.batch = shape[0], c.tokens = shape[1], c.channels = shape[2];
  } else {
    c.notes.push_back("rank " + std::to_string(shape.size()) +
                      " is not (B,C,H,W), (B,C,T,H,W) or packed tokens (B,N,64) / (B,N,128)");
    return c;
  }
  for (const detail::FamilyInfo& f : detail::family_table()) {
    if (f.family == ModelFamily::kSDXLRefiner) continue;  // same VAE as SDXL
    if (c.layout == LatentLayout::kPacked) {
      // Tokens of a video (source frames > 1) come from a video family's VAE only.
      if (f.packed_width == c.channels && (source.frames <= 1 || f.temporal_factor > 1)) {
        c.candidates.push_back(
            {f.family, packed_patch(f) == 2
                           ? "2x2-packed " + std::to_string(f.latent_channels) + "-channel tokens"
                           : std::to_string(f.latent_channels) +
                                 "-channel tokens (1x1x1 patches)"});
      }
      continue;
    }
    if (f.latent_channels != c.channels) continue;
    const bool video = c.layout == LatentLayout::kVideo;
    if (video != is_video_family(f)) continue;
    if (f.temporal_factor == 1 && c.frames != 1) continue;  // Qwen-Image: one frame
    std::string why = std::to_string(c.channels) + " channels, " +
                      (video ? "5-D video layout" : "4-D image layout");
    c.candidates.push_back({f.family, why});
  }
  if (c.layout == LatentLayout::kVideo && c.candidates.empty()) {
    const bool swapped = [&] {
      for (const detail::FamilyInfo& f : detail::family_table()) {
        if (f.latent_channels == shape[2]) return true;
      }
      return false;
    }();
    if (swapped) {
      c.notes.push_back("dimension 2 looks like channels: (B,F,C,H,W) is not a VAE layout; video VAEs produce (B,C,T,H,W)");
    }
  }
  if (source.height > 0 && source.width > 0) {
    const double pixels = static_cast<double>(source.height) * static_cast<double>(source.width);
    // Packed: latent pixels per frame = tokens x patch area (/ latent frames for LTX's).
    // 128-wide tokens of an image are Flux.2's 2x2 patches, of a video LTX's 1x1x1 ones.
    double latent_pixels = static_cast<double>(c.height) * static_cast<double>(c.width);
    if (c.layout == LatentLayout::kPacked) {
      const bool ltx = c.channels == 128 && source.frames > 1;
      latent_pixels = ltx ? static_cast<double>(c.tokens) : 4.0 * static_cast<double>(c.tokens);
      if (ltx) {
        latent_pixels /= static_cast<double>(expected_latent_frames(ModelFamily::kLtxVideo,
                                                                    source.frames));
      }
    }
    if (latent_pixels > 0) c.spatial_ratio = pixels / latent_pixels;
    std::vector<FamilyCandidate> fitting;
    std::vector<ValidationCheck> checks;
    for (const FamilyCandidate& cand : c.candidates) {
      if (check_size(detail::family_info(cand.family), c, source, checks)) fitting.push_back(cand);
    }
    c.checks = std::move(checks);
    if (!fitting.empty()) {
      c.candidates = std::move(fitting);
    } else if (!c.candidates.empty()) {
      c.notes.push_back("the latent size fits no candidate family for the given source size");
    }
  }
  if (c.layout == LatentLayout::kVideo && source.frames > 0 && c.frames > 0) {
    c.temporal_ratio = static_cast<double>(source.frames) / static_cast<double>(c.frames);
  }
  if (c.spatial_ratio > 0) c.notes.push_back("spatial compression " + fmt_ratio(c.spatial_ratio) + "x");
  return c;
}

std::vector<HealthFlag> tensor_health(const TensorStats& s) {
  std::vector<HealthFlag> flags;
  if (s.has_non_finite()) {
    flags.push_back({"non_finite", "error",
                     std::to_string(s.nan_count) + " NaN, " + std::to_string(s.pos_inf_count) +
                         " +Inf, " + std::to_string(s.neg_inf_count) +
                         " -Inf (an fp16 VAE overflowing gives NaN latents and black images; "
                         "decode in fp32/bf16 or use an fp16-fixed VAE)"});
  }
  if (s.numel > 0 && s.zero_count == s.numel) {
    flags.push_back({"all_zeros", "error", "every element is zero"});
  }
  return flags;
}

std::vector<HealthFlag> latent_health(const TensorStats& s,
                                      std::span<const FamilyCandidate> candidates) {
  std::vector<HealthFlag> flags = tensor_health(s);
  if (s.finite_count < 2 || (s.numel > 0 && s.zero_count == s.numel)) return flags;
  // Normalised latents and initial noise have std ~1; raw VAE output has ~1/scale.
  double lo = 1.0, hi = 1.0;
  for (const FamilyCandidate& c : candidates) {
    const double scale = detail::family_info(c.family).scale;
    if (scale > 0) {
      lo = std::min(lo, 1.0 / scale);
      hi = std::max(hi, 1.0 / scale);
    }
  }
  constexpr double kBandFactor = 4.0;
  if (!(s.std >= lo / kBandFactor && s.std <= hi * kBandFactor)) {
    flags.push_back({"latent_std_out_of_band", "warning",
                     "std " + fmt_ratio(s.std) + " outside [" + fmt_ratio(lo / kBandFactor) +
                         ", " + fmt_ratio(hi * kBandFactor) +
                         "] (4x around 1 for normalised latents/noise and 1/scale for raw VAE output)"});
  }
  return flags;
}

ValidationCheck check_conditioning_family(std::span<const std::int64_t> shape,
                                          ModelFamily declared) {
  const detail::FamilyInfo& f = detail::family_info(declared);
  if (shape.empty()) return {"conditioning_width", false, "scalar tensor"};
  const std::int64_t w = shape.back();
  const bool pooled = shape.size() == 2;
  const std::int64_t expected = pooled ? f.pooled_width : f.context_width;
  const bool ok = expected != 0 && w == expected;
  return {"conditioning_width", ok,
          std::string(f.name) + (pooled ? " pooled width " : " context width ") +
              (expected == 0 ? "(none)" : std::to_string(expected)) + ", got " +
              std::to_string(w)};
}

ValidationCheck check_device(std::string_view device, std::string_view expected) {
  bool ok = device == expected;
  if (!ok && expected.find(':') == std::string_view::npos) {
    ok = device.substr(0, device.find(':')) == expected;  // "cuda" matches "cuda:1"
  }
  return {"device", ok,
          "on " + std::string(device) + ", expected " + std::string(expected)};
}

ValidationCheck check_dtype(DType dtype, DType expected) {
  return {"dtype", dtype == expected,
          std::string(dtype_name(dtype)) + ", expected " + std::string(dtype_name(expected))};
}

ValidationCheck check_memory(std::int64_t bytes, std::int64_t threshold_bytes) {
  return {"memory", bytes <= threshold_bytes,
          std::to_string(bytes) + " bytes, threshold " + std::to_string(threshold_bytes)};
}

}  // namespace genscope
