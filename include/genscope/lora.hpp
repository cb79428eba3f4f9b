// LoRA files: per-module format detection (kohya, diffusers/PEFT, LyCORIS LoHa/LoKr, full
// diffs), analysis (rank, alpha, scale, ||dW||_F without forming up·down), the mapping of
// module names onto a base model's keys (ComfyUI's rules), the fit of a LoRA to a base and
// the streaming merge W <- W + strength·scale·dW. See docs/lora.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "genscope/safetensors.hpp"

namespace genscope {

/// How a module's weight delta is encoded.
enum class LoraModuleType {
  kLora,       ///< up·down (kohya lora_up/lora_down, PEFT lora_B/lora_A, ...), optional mid.
  kLoha,       ///< LyCORIS LoHa: (w1a·w1b) ⊙ (w2a·w2b).
  kLokr,       ///< LyCORIS LoKr: kron(w1, w2).
  kDiff,       ///< Full weight/bias delta (diff, diff_b).
  kSetWeight,  ///< Replacement weight.
  kNorm,       ///< Norm layer weight/bias replacement (w_norm, b_norm).
};

/// The key-naming family a module was written in.
enum class LoraNaming { kKohya, kPeft, kDiffusersOld, kLycoris };

/// Which network a module targets.
enum class LoraTarget { kUnet, kTextEncoder, kTextEncoder2, kT5, kTransformer, kUnknown };

/// Model families genscope recognises from key names.
enum class ModelArch { kUnknown, kSD1, kSD2, kSDXL, kSD3, kFlux, kWan, kQwenImage };

/// "lora", "loha", "lokr", "diff", "set_weight", "norm".
std::string_view lora_module_type_name(LoraModuleType type) noexcept;
/// "kohya", "peft", "diffusers", "lycoris".
std::string_view lora_naming_name(LoraNaming naming) noexcept;
/// "unet", "text_encoder", "text_encoder_2", "t5", "transformer", "unknown".
std::string_view lora_target_name(LoraTarget target) noexcept;
/// "SD1.x", "SD2.x", "SDXL", "SD3", "Flux", "Wan", "Qwen-Image", "unknown".
std::string_view model_arch_name(ModelArch arch) noexcept;

/// One LoRA module: the tensors sharing a module name, with what they mean.
struct LoraModule {
  std::string name;  ///< Module name as in the file, e.g. "lora_unet_down_blocks_0_..._to_q".
  LoraModuleType type = LoraModuleType::kLora;
  LoraNaming naming = LoraNaming::kKohya;
  LoraTarget target = LoraTarget::kUnknown;
  /// Role -> tensor key. Roles: up, down, mid, alpha, dora_scale, hada_w1_a, hada_w1_b,
  /// hada_w2_a, hada_w2_b, hada_t1, hada_t2, lokr_w1, lokr_w1_a, lokr_w1_b, lokr_w2,
  /// lokr_w2_a, lokr_w2_b, lokr_t2, diff, diff_b, set_weight, w_norm, b_norm, reshape_weight.
  std::map<std::string, std::string> tensors;
  std::int64_t rank = 0;          ///< Rows of down (LoRA/LoHa), 0 when not applicable.
  std::optional<double> alpha;    ///< The alpha tensor's value, when present.
  double scale = 1.0;             ///< alpha / rank; 1 when alpha is missing or 0.
  std::vector<std::int64_t> delta_shape;  ///< Shape of the weight the module changes.
  std::int64_t parameter_count = 0;
  std::uint64_t bytes = 0;
  bool dora = false;              ///< Has a DoRA magnitude (dora_scale / lora_magnitude_vector).
  /// ||dW||_F at strength 1 (scale included); NaN when not computed or not computable.
  double delta_norm = std::numeric_limits<double>::quiet_NaN();
};

/// Groups a key list into modules (no tensor data needed). Keys matching no known suffix
/// are returned in `unknown_keys`, never dropped. Ranks/shapes/alpha are left empty.
std::vector<LoraModule> group_lora_keys(const std::vector<std::string>& keys,
                                        std::vector<std::string>* unknown_keys);

/// Frobenius norm of up·down computed as sqrt(trace((A Aᵀ)(Bᵀ B))): O(r²(m+n)), no m×n product.
/// `up` is m×r, `down` is r×n, both row-major float32.
double lora_delta_norm(const float* up, const float* down, std::int64_t m, std::int64_t r,
                       std::int64_t n);

/// An opened, analysed LoRA file (keeps the file mapped).
class LoraFile {
 public:
  /// Opens, groups and analyses a LoRA; `norms` also computes every module's ||dW||_F.
  static std::shared_ptr<const LoraFile> open(const std::filesystem::path& path, bool norms = true);

  /// The file path.
  const std::filesystem::path& path() const noexcept { return path_; }
  /// The mapped file.
  const SafetensorsFile& file() const noexcept { return file_; }
  /// Modules in name order.
  const std::vector<LoraModule>& modules() const noexcept { return modules_; }
  /// Keys that belong to no recognised module.
  const std::vector<std::string>& unknown_keys() const noexcept { return unknown_keys_; }
  /// Architecture suggested by the module names.
  ModelArch arch() const noexcept { return arch_; }
  /// The evidence for arch(), in words.
  const std::string& arch_evidence() const noexcept { return arch_evidence_; }
  /// Module by name; nullptr when absent.
  const LoraModule* module(std::string_view name) const noexcept;
  /// dW of one module as float32 (delta_shape, row-major), scale included, strength 1.
  /// Throws genscope::Error (LoraMissingHalf, LoraRankMismatch, LoraNaN, ...) naming it.
  std::vector<float> delta(const LoraModule& module) const;
  /// weight += coefficient·dW (scale included; diff and w_norm unscaled) for a float32 weight
  /// of dW's size, without allocating dW for up·down modules. Same errors as delta().
  void add_delta(const LoraModule& module, double coefficient, std::span<float> weight) const;
  /// Checks that the module's patch can be formed (halves present, factor shapes chain, no
  /// NaN/Inf).
  void validate(const LoraModule& module) const;
  /// Checks, without touching data, that the module's weight patch (or, with `bias`, its bias
  /// patch) fits a tensor of `shape` as ComfyUI lays it out; LoraShapeMismatch otherwise.
  void validate_patch(const LoraModule& module, bool bias, std::span<const std::int64_t> shape) const;
  /// One ComfyUI calculate_weight step on a float32 weight of `shape`: W += strength·scale·dW
  /// (LoRA, LoCon, LoHa, LoKr, incl. Tucker), DoRA's weight_decompose when the module has a
  /// `.dora_scale`, W += strength·diff (diff, w_norm), W = set_weight (strength unused).
  void patch_weight(const LoraModule& module, double strength, std::span<float> weight,
                    std::span<const std::int64_t> shape) const;
  /// The module's bias patch (diff_b, or b_norm beside w_norm): bias += strength·Δb.
  void patch_bias(const LoraModule& module, double strength, std::span<float> bias) const;

 private:
  LoraFile(std::filesystem::path path, SafetensorsFile file);
  std::filesystem::path path_;
  SafetensorsFile file_;
  std::vector<LoraModule> modules_;
  std::vector<std::string> unknown_keys_;
  ModelArch arch_ = ModelArch::kUnknown;
  std::string arch_evidence_;
};

/// The structure of an ldm UNet (ComfyUI unet_config subset).
struct UnetConfig {
  std::vector<int> num_res_blocks;            ///< Per level.
  std::vector<int> transformer_depth;         ///< Per input res block.
  std::vector<int> transformer_depth_output;  ///< Per output block.
  int transformer_depth_middle = 0;
};

/// Detects the model family from state-dict keys (ldm, diffusers or transformer naming).
ModelArch detect_model_arch(const std::vector<std::string>& model_keys);
/// Reads the UNet structure from ldm keys (any prefix before "input_blocks.") or diffusers
/// keys (any prefix before "down_blocks.").
std::optional<UnetConfig> unet_config_from_keys(const std::vector<std::string>& model_keys);
/// ComfyUI's unet_to_diffusers: diffusers UNet key -> ldm key, generated from the structure.
std::map<std::string, std::string> unet_to_diffusers(const UnetConfig& config);
/// Which loader's rules a fit follows (`--loader`).
enum class LoraLoader {
  kComfyUI,    ///< ComfyUI's LoraLoader: comfy/lora.py key maps, load_lora, add_patches.
  kDiffusers,  ///< diffusers' load_lora_weights: lora_conversion_utils converters, then PEFT.
};

/// "comfyui", "diffusers".
std::string_view lora_loader_name(LoraLoader loader) noexcept;
/// The loader named "comfyui" or "diffusers"; nullopt for any other name.
std::optional<LoraLoader> lora_loader_from_name(std::string_view name) noexcept;

/// Where a LoRA module lands in the base file. The delta (or its rows
/// [delta_row_offset, delta_row_offset + rows) when `rows` > 0) is added to `key`, to the
/// rows row_window() names; `transpose` adds dWᵀ; `materialize_identity` means the weight is
/// not in the file and the loader patches an identity-initialised one of `shape`.
struct LoraKeyTarget {
  std::string key;   ///< Base file key (for materialize_identity: the key it is written under).
  int chunk = 0;     ///< Equal row chunk: OpenCLIP's fused attn.in_proj_weight holds q, k, v
  int chunks = 1;    ///< as chunks 0, 1, 2 of 3.
  std::int64_t row_offset = 0;  ///< Explicit row window (ComfyUI offset patch (0, start, length)):
  std::int64_t rows = 0;        ///< first row and row count; 0 rows = whole weight / chunk decides.
  /// First row of the module's delta landing here, when one fused delta (e.g. Flux qkv) is
  /// split over several file tensors (a diffusers-layout base): rows [delta_row_offset,
  /// delta_row_offset + rows) of dW.
  std::int64_t delta_row_offset = 0;
  std::string bias_key{};  ///< `<module>.bias` patched by the module's diff_b / b_norm; empty when none.
  bool transpose = false;  ///< The file stores this weight transposed (SDXL OpenCLIP text_projection).
  bool materialize_identity = false;  ///< Absent from the file; ComfyUI patches an identity weight.
  std::vector<std::int64_t> shape{};  ///< Shape of the materialised identity weight.
  /// First row and row count of the patched window in a weight of `weight_rows` rows.
  std::pair<std::int64_t, std::int64_t> row_window(std::int64_t weight_rows) const noexcept;
};
/// The loader's LoRA name -> base target map over a checkpoint's keys (ComfyUI:
/// model_lora_keys_unet + model_lora_keys_clip, in their order; later names win). Row windows
/// that need tensor shapes (Flux/SD3 fused qkv) are left at 0 rows by this key-only form.
std::map<std::string, LoraKeyTarget> lora_key_map(const std::vector<std::string>& model_keys);
/// The same over a checkpoint file, with shapes (row windows filled in).
std::map<std::string, LoraKeyTarget> lora_key_map(const SafetensorsFile& base,
                                                   LoraLoader loader = LoraLoader::kComfyUI);
/// Architecture suggested by LoRA module names, with the evidence in words.
ModelArch detect_lora_arch(const std::vector<std::string>& module_names, std::string* evidence);

/// A module the loader applies nothing from because another name reaching the same base
/// weight (and row window) comes later in its key-map order (ComfyUI keeps the last one).
struct LoraShadowedModule {
  std::string module;  ///< The dropped module.
  std::string by;      ///< The module applied instead.
  std::string key;     ///< The base weight both reach.
};

/// A module on which the loader itself fails (ComfyUI raises KeyError for an up without its
/// down; diffusers raises ValueError for keys its converter cannot rename).
struct LoraLoaderFailure {
  std::string module;
  std::string error;    ///< genscope error name a merge throws (LoraMissingHalf, LoraUnsupported).
  std::string message;  ///< What the loader does, in words.
};

/// A weight the loader builds itself and patches, which is not a tensor of the base file:
/// ComfyUI's CLIP text encoders always have a text_projection, identity-initialised when the
/// checkpoint has none (SD1.x, SDXL's CLIP-L, Flux). The fit still lists the module in
/// `matched` (materialize_identity: a merge writes the patched identity as a new tensor),
/// but it is not counted among the base weights patched, nor as missing from the file.
struct LoraBuiltinPatch {
  std::string module;  ///< The LoRA module, e.g. "lora_te1_text_projection".
  std::string weight;  ///< The loader's model key, e.g. "clip_l.transformer.text_projection.weight".
  std::string what;    ///< In words, e.g. "the clip_l text encoder's built-in text_projection
                       ///< (identity-initialised; not in the file)".
};

/// One base file tensor a matched module patches: its weight, or its bias (a diff_b / b_norm
/// patch, `LoraKeyTarget::bias_key`), as ComfyUI's patch dict has one entry for each.
struct LoraPatchedTensor {
  std::string key;     ///< Base file key.
  std::string module;  ///< The LoRA module patching it.
  bool bias = false;   ///< A bias patch.
};

/// What the other loader profile would do with the same files.
struct LoraLoaderComparison {
  LoraLoader loader = LoraLoader::kDiffusers;
  std::size_t tensors_loaded = 0;           ///< LoRA tensors the other loader loads.
  std::vector<std::string> only_other_loads;  ///< Tensors it loads and this profile does not.
  std::vector<std::string> only_this_loads;   ///< Tensors this profile loads and it does not.
  bool fails = false;                         ///< The other loader fails on this LoRA.
  std::string summary;  ///< One line, e.g. "diffusers would load these 256 tensors".
};

/// How a LoRA fits a base model under one loader's rules.
struct LoraFit {
  LoraLoader loader = LoraLoader::kComfyUI;
  ModelArch lora_arch = ModelArch::kUnknown;
  ModelArch base_arch = ModelArch::kUnknown;
  /// Modules the loader really applies, at most one per base weight and row window, in the
  /// loader's order: module -> base target. merge_lora applies exactly these.
  std::vector<std::pair<std::string, LoraKeyTarget>> matched;
  /// ComfyUI "lora key not loaded: <key>": LoRA tensor keys the loader does not use
  /// (unmapped modules, half LoRAs, unknown suffixes); diffusers: keys it drops.
  std::vector<std::string> lora_keys_not_loaded;
  /// ComfyUI "NOT LOADED <key>": patch keys the model does not have (e.g. a diff_b on a
  /// weight without bias, a diffusers name for a layer this UNet lacks).
  std::vector<std::string> not_loaded;
  /// Model keys the loader builds from the detected config and patches, but this file lacks
  /// (a pruned checkpoint): ComfyUI applies these modules; a merge cannot.
  std::vector<std::string> missing_from_file;
  /// Weights the loader builds itself (not in the file) that matched modules patch.
  std::vector<LoraBuiltinPatch> builtin_patched;
  /// Modules dropped because a later name reaches the same weight (warning).
  std::vector<LoraShadowedModule> shadowed;
  /// Modules the loader fails on (the whole load fails with the loader).
  std::vector<LoraLoaderFailure> loader_failures;
  /// Modules the loader applies in a way a merge into this file cannot reproduce (a
  /// swap_scale_shift target, a bias window, the loader ignoring a PEFT DoRA magnitude...):
  /// merge_lora refuses them by name.
  std::vector<LoraLoaderFailure> merge_unsupported;
  /// Matched modules whose delta shape does not fit the base weight ("module: a vs b").
  std::vector<std::string> shape_mismatches;
  std::size_t lora_tensors = 0;          ///< Tensors in the LoRA file.
  std::size_t tensors_loaded = 0;        ///< Of which the loader uses.
  std::size_t base_weights_patched = 0;  ///< Distinct base file tensors receiving a patch
                                         ///< (builtin_patched weights not counted).
  std::size_t base_keys = 0;
  bool architecture_mismatch = false;
  /// One sentence naming the loader, e.g. "comfyui: all 264 modules load onto this SDXL base".
  std::string verdict;
  /// The other profile, when it was computed (fit_lora computes it).
  std::optional<LoraLoaderComparison> other_loader;
  /// True when every module matched with a compatible shape and no mismatch was found.
  bool fits() const noexcept;
  /// Every base file tensor `matched` patches, weights and biases each on their own, in
  /// `matched` order (builtin_patched weights excluded); base_weights_patched counts their
  /// distinct keys.
  std::vector<LoraPatchedTensor> patched_tensors() const;
};

/// Matches a LoRA against a base model file under `loader`'s rules; with
/// `compare_other_loader`, also summarises what the other loader would do (`other_loader`).
LoraFit fit_lora(const LoraFile& lora, const SafetensorsFile& base,
                 LoraLoader loader = LoraLoader::kComfyUI, bool compare_other_loader = true);

/// Result of a merge.
struct LoraMergeResult {
  std::size_t modules_merged = 0;
  std::size_t weights_patched = 0;
  std::uint64_t bytes_written = 0;        ///< Size of the output's data section.
  std::uint64_t patched_bytes = 0;        ///< Bytes of the patched weights.
  LoraFit fit;
};

/// Merges `lora` into `base` at `strength` as `loader` would apply it (fit_lora(...,
/// loader).matched, nothing else) and writes `out` atomically. Nothing is written when the
/// merge cannot be done correctly; errors: LoraMissingHalf, LoraRankMismatch, LoraNaN,
/// LoraShapeMismatch, LoraArchitectureMismatch, LoraNothingToMerge, LoraUnsupported.
LoraMergeResult merge_lora(const std::filesystem::path& base, const std::filesystem::path& lora,
                           const std::filesystem::path& out, double strength,
                           LoraLoader loader = LoraLoader::kComfyUI);

/// JSON forms.
void to_json(nlohmann::json& json, const LoraModule& module);
void to_json(nlohmann::json& json, const LoraFit& fit);
/// Summary of a LoRA file: counts per type/target/naming, modules, unknown keys.
nlohmann::json lora_inspection_json(const LoraFile& lora);

}  // namespace genscope
