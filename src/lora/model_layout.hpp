// The model a loader builds from a checkpoint file, key by key: ComfyUI's state-dict keys
// ("diffusion_model.…", "clip_l.transformer.…", "t5xxl.transformer.…") or diffusers' module
// paths ("unet.…", "transformer.…", "text_encoder.…"), each with where it lives in the file
// (a tensor, a row window of one, several tensors for a fused weight stored split, nothing
// when the file lacks it). Key maps are generated over these keys, as the loaders generate
// them over their model's state dict.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "genscope/lora.hpp"
#include "lora/family_maps.hpp"

namespace genscope::detail {

/// A base file tensor: name and shape (views; shape empty when only names are known).
struct BaseTensor {
  std::string_view name;
  std::span<const std::int64_t> shape;
};

/// A base file's tensors (views into the file, or into a key list, which must outlive it)
/// with a sorted index answering name and prefix questions in O(log n).
class BaseFile {
 public:
  explicit BaseFile(const SafetensorsFile& base);
  explicit BaseFile(const std::vector<std::string>& keys);
  /// In file order.
  const std::vector<BaseTensor>& tensors() const noexcept { return tensors_; }
  /// Index of `name` in tensors(); -1 when absent.
  long find(std::string_view name) const;
  bool has(std::string_view name) const { return find(name) >= 0; }
  bool has_prefix(std::string_view prefix) const;
  /// Count of consecutive i with a key starting with base + i + ".".
  int count_blocks(const std::string& base) const;

 private:
  void index();
  std::vector<BaseTensor> tensors_;
  std::vector<std::pair<std::string_view, std::size_t>> sorted_;
};

/// Copies of strings with stable addresses, allocated in large blocks.
class StringArena {
 public:
  /// A stable copy of `s`.
  std::string_view intern(std::string_view s);

 private:
  std::vector<std::unique_ptr<char[]>> blocks_;
  std::size_t used_ = 0, capacity_ = 0;
};

/// Rows [model_row, model_row + rows) of a model tensor live at `where` in the file.
struct ModelPiece {
  LoraKeyTarget where;
  std::int64_t model_row = 0;
  std::int64_t rows = 0;  ///< 0: the whole tensor (a single piece).
};

/// Where a model tensor lives (compact: resolved into pieces by LoaderModel::view).
struct ModelTensor {
  enum class Kind : std::uint8_t {
    kInFile,    ///< In the file (possibly as a row window, transposed, or split).
    kMissing,   ///< The loader builds it from the detected config; the file lacks it.
    kIdentity,  ///< Not in the file; the loader initialises it to the identity.
  };
  Kind kind = Kind::kInFile;
  bool transpose = false;      ///< The file stores it transposed.
  bool swapped = false;        ///< The loader swaps its row halves on conversion (swap_scale_shift).
  std::int16_t chunk = 0, chunks = 1;  ///< Equal row chunk of the file tensor.
  std::int32_t file = -1;      ///< File tensor index (single piece); -1 when none.
  std::int32_t split = -1;     ///< Index into LoaderModel::splits for a fused weight stored split.
  std::int64_t row_offset = 0, rows = 0;  ///< Row window of the file tensor (rows 0: none);
                                          ///< kIdentity: rows = width.
  std::string_view would_be;   ///< File key it would have (kMissing / kIdentity).
};

/// A model tensor resolved: its pieces in the file and its shape.
struct TensorView {
  ModelTensor::Kind kind = ModelTensor::Kind::kInFile;
  bool swapped = false;
  std::vector<ModelPiece> pieces;
  std::vector<std::int64_t> shape;  ///< Model-side shape; empty when unknown.
};

/// Which text encoder a tower of the file is, in the loader's model.
struct TextTower {
  std::string name;         ///< ComfyUI: "clip_l", "clip_g", "clip_h", "t5xxl".
  std::string file_prefix;  ///< Prefix of its keys in the file.
  bool open_clip = false;   ///< OpenCLIP layout (resblocks, fused in_proj) in the file.
};

/// The loader's model over a base file. Keeps views into `file` (which must outlive it).
struct LoaderModel {
  const BaseFile* file = nullptr;
  ModelArch arch = ModelArch::kUnknown;
  std::string diffusion_prefix;  ///< Prefix of the diffusion model's keys in the file.
  bool diffusers_layout = false;  ///< The file names the diffusion model as diffusers does.
  std::vector<std::string_view> diffusion_keys;  ///< Model keys of the diffusion model, state-dict order.
  std::vector<std::string_view> text_keys;       ///< Model keys of the text encoders.
  std::vector<TextTower> towers;
  std::unordered_map<std::string_view, ModelTensor> tensors;  ///< Model key -> where it lives.
  std::vector<std::vector<std::pair<std::int32_t, std::int64_t>>> splits;  ///< (file tensor, model row).
  std::optional<UnetConfig> unet;  ///< UNet families.
  std::vector<FamilyPair> pairs;   ///< The family's original <-> diffusers names.
  int mmdit_depth = 0;             ///< SD3: x_embedder rows / 64 (ComfyUI's "depth").
  int mmdit_blocks = 0;            ///< SD3: joint blocks.
  int flux_double = 0, flux_single = 0;
  std::int64_t flux_hidden = 0;
  int wan_blocks = 0;
  StringArena arena;               ///< Model keys and would-be file keys.
  /// The model tensor of `key`; nullptr when the model has no such key.
  const ModelTensor* find(std::string_view key) const;
  /// `t` resolved into file pieces and its shape.
  TensorView view(const ModelTensor& t) const;
};

/// ComfyUI's model (checkpoint loader + model_detection conversions) over `tensors`.
LoaderModel comfy_model(const BaseFile& base);
/// diffusers' model (from_single_file conversions) over `tensors`: keys are module paths
/// with ".weight"/".bias", prefixed by the pipeline component ("unet.", "transformer.",
/// "text_encoder.", "text_encoder_2.", "text_encoder_3.").
LoaderModel diffusers_model(const BaseFile& base);

/// The UNet structure of a checkpoint whose UNet keys may sit under any prefix (ldm keys
/// around "input_blocks.0.0.weight" or diffusers keys around "down_blocks.0.resnets.0.").
std::optional<UnetConfig> unet_config_of(const BaseFile& base);
/// Family of the diffusion model (and whether its keys use diffusers names) from file keys.
ModelArch detect_family(const BaseFile& base, std::string* prefix, bool* diffusers);

}  // namespace genscope::detail
