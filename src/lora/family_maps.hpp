// Original <-> diffusers names of each model family's weights, generated from the structure
// (block counts, widths) the way the upstream converters generate them:
//   UNet:  ComfyUI comfy/utils.py unet_to_diffusers
//   SD3:   ComfyUI comfy/utils.py mmdit_to_diffusers
//   Flux:  ComfyUI comfy/utils.py flux_to_diffusers
//   Wan:   diffusers scripts/convert_wan_to_diffusers.py TRANSFORMER_KEYS_RENAME_DICT (also
//          src/diffusers/loaders/single_file_utils.py convert_wan_transformer_to_diffusers)
// (ComfyUI at Comfy-Org/ComfyUI@09708eae709a992a5684bed3595ce4d07e705b4e; diffusers at
// huggingface/diffusers@019c4962f0bbfc90cd1ac86ced68fb8676e5a5f7.)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "genscope/lora.hpp"

namespace genscope::detail {

/// One weight under both names. A row window (rows > 0) means the diffusers weight is rows
/// [offset, offset + rows) of the original (fused) weight; `swap_halves` marks ComfyUI's
/// swap_scale_shift (the two row halves are exchanged).
struct FamilyPair {
  std::string diffusers;
  std::string original;
  std::int64_t offset = 0;
  std::int64_t rows = 0;
  bool swap_halves = false;
};

/// unet_to_diffusers in ComfyUI's insertion order (its UNET_MAP_ATTENTIONS,
/// TRANSFORMER_BLOCKS and UNET_MAP_BASIC are Python sets: their order there follows the
/// string hash seed; here it is the listed order).
std::vector<FamilyPair> unet_pairs(const UnetConfig& config);
/// mmdit_to_diffusers: `depth` is ComfyUI's x_embedder rows / 64, `blocks` the joint blocks.
std::vector<FamilyPair> mmdit_pairs(int depth, int blocks);
/// flux_to_diffusers with `hidden` = img_in rows.
std::vector<FamilyPair> flux_pairs(int double_blocks, int single_blocks, std::int64_t hidden);
/// The Wan 2.x DiT renames (per block and global), for `blocks` blocks.
std::vector<FamilyPair> wan_pairs(int blocks);

}  // namespace genscope::detail
