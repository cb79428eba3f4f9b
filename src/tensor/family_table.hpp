// The per-family facts of docs/domain.md §1–§2 as one table.
#pragma once

#include <span>
#include <string_view>

#include "genscope/tensor_classify.hpp"

namespace genscope::detail {

/// One family's text-conditioning and VAE facts.
struct FamilyInfo {
  ModelFamily family;
  std::string_view name;      // display name
  std::string_view ids;       // comma-separated short ids accepted by parse_family
  std::int64_t context_width; // last dim of the context tensor
  std::string_view tokens;    // human description of the sequence length
  std::int64_t pooled_width;  // 0 = no pooled vector
  int latent_channels;
  int spatial_factor;
  int temporal_factor;        // 0 = image VAE, 1 = single-frame 5-D, 4 or 8 = causal video
  int packed_width;           // the transformer sees (B, N, packed_width) tokens: 64 = 2x2
                              // patches of 16 channels (Flux, Qwen-Image), 128 = 2x2 patches of
                              // 32 channels (Flux.2) or LTX's 1x1x1 patches of 128 channels;
                              // 0 = latents stay (B,C,H,W)/(B,C,T,H,W)
  double scale;               // scaling factor (0 = per-channel mean/std normalisation)
  std::int64_t audio_width = 0;  // last dim of the audio stream's context (LTX-2); 0 = none
};

/// An alias naming several families whose tensors differ ("wan2.2").
struct FamilyAlias {
  std::string_view ids;  // comma-separated names
  std::span<const ModelFamily> families;
};

/// All aliases.
std::span<const FamilyAlias> family_aliases() noexcept;

/// All families, in ModelFamily order.
std::span<const FamilyInfo> family_table() noexcept;
/// The row of one family.
const FamilyInfo& family_info(ModelFamily family) noexcept;

}  // namespace genscope::detail
