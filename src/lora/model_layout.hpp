// The model a loader builds from a checkpoint file, key by key: ComfyUI's state-dict keys
// ("diffusion_model.…", "clip_l.transformer.…", "t5xxl.transformer.…") or diffusers' module
// paths ("unet.…", "transformer.…", "text_encoder.…"), each with where it lives in the file
// (a tensor, a row window of one, several tensors for a fused weight stored split, nothing
// when the file lacks it). Key maps are generated over these keys, as the loaders generate
// them over their model's state dict.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "genscope/lora.hpp"

namespace genscope::detail {

/// A base file tensor: name and shape (shape empty when only names are known).
struct BaseTensor {
  std::string name;
  std::vector<std::int64_t> shape;
};

/// The file tensors of a base file as BaseTensor.
std::vector<BaseTensor> base_tensors(const SafetensorsFile& base);
/// Names only (shapes unknown).
std::vector<BaseTensor> base_tensors(const std::vector<std::string>& keys);

/// Rows [model_row, model_row + rows) of a model tensor live at `where` in the file.
struct ModelPiece {
  LoraKeyTarget where;
  std::int64_t model_row = 0;
  std::int64_t rows = 0;  ///< 0: the whole tensor (a single piece).
};

/// Where a model tensor lives.
struct ModelTensor {
  enum class Kind {
    kInFile,    ///< In the file (possibly as a row window, transposed, or split).
    kMissing,   ///< The loader builds it from the detected config; the file lacks it.
    kIdentity,  ///< Not in the file; the loader initialises it to the identity.
  };
  Kind kind = Kind::kInFile;
  std::vector<ModelPiece> pieces;   ///< One piece unless a fused weight is stored split.
  std::vector<std::int64_t> shape;  ///< Model-side shape; empty when unknown.
  bool swapped = false;  ///< The loader swaps its row halves on conversion (swap_scale_shift).
};

/// Which text encoder a tower of the file is, in the loader's model.
struct TextTower {
  std::string name;         ///< ComfyUI: "clip_l", "clip_g", "clip_h", "t5xxl".
  std::string file_prefix;  ///< Prefix of its keys in the file.
  bool open_clip = false;   ///< OpenCLIP layout (resblocks, fused in_proj) in the file.
};

/// The loader's model over a base file.
struct LoaderModel {
  ModelArch arch = ModelArch::kUnknown;
  std::string diffusion_prefix;  ///< Prefix of the diffusion model's keys in the file.
  bool diffusers_layout = false;  ///< The file names the diffusion model as diffusers does.
  std::vector<std::string> diffusion_keys;  ///< Model keys of the diffusion model, state-dict order.
  std::vector<std::string> text_keys;       ///< Model keys of the text encoders.
  std::vector<TextTower> towers;
  std::unordered_map<std::string, ModelTensor> tensors;  ///< Model key -> where it lives.
  std::optional<UnetConfig> unet;  ///< UNet families.
  int mmdit_depth = 0;             ///< SD3: x_embedder rows / 64 (ComfyUI's "depth").
  int mmdit_blocks = 0;            ///< SD3: joint blocks.
  int flux_double = 0, flux_single = 0;
  std::int64_t flux_hidden = 0;
  int wan_blocks = 0;
  /// The model tensor of `key`; nullptr when the model has no such key.
  const ModelTensor* find(std::string_view key) const;
};

/// ComfyUI's model (checkpoint loader + model_detection conversions) over `tensors`.
LoaderModel comfy_model(const std::vector<BaseTensor>& tensors);
/// diffusers' model (from_single_file conversions) over `tensors`: keys are module paths
/// with ".weight"/".bias", prefixed by the pipeline component ("unet.", "transformer.",
/// "text_encoder.", "text_encoder_2.", "text_encoder_3.").
LoaderModel diffusers_model(const std::vector<BaseTensor>& tensors);

/// Family of the diffusion model (and whether its keys use diffusers names) from file keys.
ModelArch detect_family(const std::vector<BaseTensor>& tensors, std::string* prefix, bool* diffusers);

}  // namespace genscope::detail
