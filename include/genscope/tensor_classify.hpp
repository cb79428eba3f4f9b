// Model-family classification of conditioning tensors and VAE latents from their shapes,
// latent health flags and the validation checks of a text-encoding / latent step.
//
// The facts come from docs/domain.md §1–§2 (not the seeds' table). A classification is a
// candidate set with a reason per candidate; it names one family only when the evidence
// leaves one.
//
// Example:
//   auto c = genscope::classify_conditioning({1, 512, 4096}, std::vector<std::int64_t>{1, 768});
//   // c.unique() and c.candidates[0].family == genscope::ModelFamily::kFlux1Dev
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "genscope/dtype.hpp"
#include "genscope/tensor_stats.hpp"

namespace genscope {

/// Diffusion model families (text conditioning and VAE latents).
enum class ModelFamily {
  kSD1, kSD2, kSDXL, kSDXLRefiner, kSD3, kFlux1Dev, kFlux1Schnell, kWan21, kWan22TI2V,
  kQwenImage, kHunyuanVideo, kLtxVideo, kFlux2, kFlux2Klein4B, kFlux2Klein9B, kHunyuanVideo15,
  kLtx2, kLtx23,
};

/// Display name: "SD1.x", "SDXL", "Flux.1-dev", "Wan 2.x", "Wan 2.2 TI2V-5B", ...
std::string_view family_name(ModelFamily family) noexcept;
/// Parses a display name or a short id ("sd1", "sdxl", "flux-dev", "wan", "qwen-image", ...).
/// An alias naming several families ("wan2.2", "flux2-klein") gives the first of them.
std::optional<ModelFamily> parse_family(std::string_view name) noexcept;
/// Every family a name can mean: one for a family's name or id, several for an alias whose
/// models differ in their tensors ("wan2.2": A14B's 16-channel Wan 2.x and TI2V-5B's 48
/// channels; "flux2-klein": the 4B and 9B text widths; "ltx2": LTX-2.0's 3840-wide contexts or
/// LTX-2.3's 4096 / 2048). An alias's id is looked up before the display names ("LTX-2" is the
/// alias, as the model series). Empty when unknown.
std::vector<ModelFamily> families_named(std::string_view name);

/// One possible family and the evidence for it.
struct FamilyCandidate {
  ModelFamily family;  ///< The family.
  std::string reason;  ///< The evidence, e.g. "context 77 x 2048 (...)".
};

/// What a conditioning tensor is.
struct ConditioningClassification {
  std::string role;  ///< "context" (rank 3), "pooled" (rank 2) or "unknown".
  std::int64_t tokens = 0;  ///< Sequence length of a context tensor.
  std::int64_t width = 0;   ///< Last dimension.
  std::vector<FamilyCandidate> candidates;  ///< Empty when nothing matches.
  std::vector<std::string> notes;  ///< Ambiguities and unusual facts.
  /// True when exactly one family remains.
  bool unique() const noexcept { return candidates.size() == 1; }
};

/// Classifies a conditioning shape, optionally with the pooled companion's shape.
ConditioningClassification classify_conditioning(
    std::span<const std::int64_t> shape,
    std::optional<std::vector<std::int64_t>> pooled_shape = std::nullopt);

/// Latent tensor layouts.
enum class LatentLayout { kUnknown, kImage, kVideo, kPacked };
/// "image (B,C,H,W)", "video (B,C,T,H,W)", "packed tokens (B,N,C)", "unknown".
std::string_view layout_name(LatentLayout layout) noexcept;

/// Size of the pixel-space source (0 = unknown).
struct SourceSize {
  std::int64_t height = 0;
  std::int64_t width = 0;
  std::int64_t frames = 0;  ///< Video frames F (0 or 1 for images).
};

/// One named pass/fail check with its reason.
struct ValidationCheck {
  std::string name;     ///< "conditioning_width", "device", "dtype", "memory", "latent_size", ...
  bool passed = false;  ///< The verdict.
  std::string reason;   ///< Expected vs found.
};

/// What a latent tensor is.
struct LatentClassification {
  LatentLayout layout = LatentLayout::kUnknown;  ///< From the rank (and last dim for packed).
  std::int64_t batch = 0;     ///< B.
  std::int64_t channels = 0;  ///< C (packed tokens: 64 for Flux/Qwen-Image, 128 for LTX).
  std::int64_t frames = 0;    ///< Latent frames T (video only).
  std::int64_t height = 0;    ///< Latent h (image/video).
  std::int64_t width = 0;     ///< Latent w (image/video).
  std::int64_t tokens = 0;    ///< N (packed only).
  std::vector<FamilyCandidate> candidates;  ///< VAE families that fit; empty when none.
  double spatial_ratio = 0;   ///< (H*W)/(h*w); 0 when the source size is unknown.
  double temporal_ratio = 0;  ///< F/T; 0 when unknown or not video.
  std::vector<ValidationCheck> checks;  ///< "latent_size" per remaining candidate family.
  std::vector<std::string> notes;  ///< Layout problems, size mismatches, ratios.
  /// True when exactly one family remains.
  bool unique() const noexcept { return candidates.size() == 1; }
};

/// Classifies a latent shape; with a source size also checks the expected latent size.
LatentClassification classify_latent(std::span<const std::int64_t> shape,
                                     const SourceSize& source = {});

/// The tensors a pipeline's denoiser was seen with: each may be absent (empty shape).
struct PipelineTensors {
  std::vector<std::int64_t> context;  ///< (B, tokens, width) the denoiser receives.
  std::vector<std::int64_t> pooled;   ///< (B, width); empty = none received.
  std::vector<std::int64_t> latent;   ///< The latents the scheduler steps.
  SourceSize source;                  ///< Output size, when known.
  /// (B, tokens, width) of the audio stream's context (LTX-2: audio_encoder_hidden_states);
  /// empty = the denoiser received none (the families with an audio stream are out);
  /// nullopt = not known (no narrowing).
  std::optional<std::vector<std::int64_t>> audio_context = std::nullopt;
};

/// One verdict from every tensor seen: the families every tensor's classification allows
/// (context width and tokens narrowed by the pooled companion, or its absence; latent rank,
/// channels, packing and VAE factor). Flux.1-dev and Wan share a 512 x 4096 context, the
/// latent rank tells them apart; Flux.1-schnell and HunyuanVideo share 256 x 4096 + pooled
/// 768, the latents tell them apart; LTX-Video and LTX-2.3 share a 4096-wide context (up to
/// 1024 tokens) and the latents, the audio context (none, or LTX-2.3's 2048) tells them apart.
struct FamilyVerdict {
  std::vector<FamilyCandidate> candidates;  ///< Families fitting every tensor seen.
  std::vector<std::string> notes;           ///< What each tensor allowed, conflicts.
  /// True when exactly one family remains.
  bool unique() const noexcept { return candidates.size() == 1; }
};

/// The verdict of a pipeline's tensors (see PipelineTensors).
FamilyVerdict classify_pipeline(const PipelineTensors& tensors);

/// The family a name means for these tensors: among families_named(name), the first that
/// classify_pipeline(tensors) keeps ("wan2.2" with 48-channel latents: TI2V-5B; with 16:
/// A14B's Wan 2.x); the first of them when none is kept or the name names one family.
/// nullopt for an unknown name.
std::optional<ModelFamily> resolve_family(std::string_view name, const PipelineTensors& tensors);

/// Latent frames a family's VAE produces for F frames: floor((F+3)/4) for x4 families,
/// floor((F+7)/8) for LTX, 1 for image families; 0 when F <= 0.
std::int64_t expected_latent_frames(ModelFamily family, std::int64_t frames) noexcept;
/// Spatial down-sampling factor of a family's VAE (8, 16 or 32).
int spatial_factor(ModelFamily family) noexcept;
/// Latent channels of a family's VAE (4, 16, 48 or 128).
int latent_channels(ModelFamily family) noexcept;
/// Context width (last dimension) of a family's text conditioning.
std::int64_t context_width(ModelFamily family) noexcept;
/// Width of a family's audio context (LTX-2.0 3840, LTX-2.3 2048); 0 = no audio stream.
std::int64_t audio_context_width(ModelFamily family) noexcept;

/// A health problem found in a tensor's statistics.
struct HealthFlag {
  std::string name;      ///< "non_finite", "all_zeros", "latent_std_out_of_band".
  std::string severity;  ///< "error" or "warning".
  std::string message;
};

/// Health flags of any tensor: NaN/Inf present, all zeros.
std::vector<HealthFlag> tensor_health(const TensorStats& stats);
/// tensor_health plus the latent std band check against the candidate families
/// (see docs/tensor-analysis.md for the band).
std::vector<HealthFlag> latent_health(const TensorStats& stats,
                                      std::span<const FamilyCandidate> candidates);

/// Check "conditioning_width": the context (or pooled) width fits the declared family.
ValidationCheck check_conditioning_family(std::span<const std::int64_t> shape,
                                          ModelFamily declared);
/// Check "device": the tensor lives where expected ("cuda" matches any "cuda:N").
ValidationCheck check_device(std::string_view device, std::string_view expected);
/// Check "dtype": the dtype is the expected one.
ValidationCheck check_dtype(DType dtype, DType expected);
/// Check "memory": bytes <= threshold_bytes.
ValidationCheck check_memory(std::int64_t bytes, std::int64_t threshold_bytes);

}  // namespace genscope
