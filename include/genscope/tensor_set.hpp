// TensorSet: named tensors read from a tensor dump — one .npy file, one .safetensors file,
// or a folder of them (two runs' or two pipelines' dumps) — and their comparison by name.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "genscope/tensor_compare.hpp"
#include "genscope/tensor_view.hpp"

namespace genscope {

/// Named tensors from dump files; owns the mapped files. Movable.
class TensorSet {
 public:
  /// One named tensor.
  struct Item {
    std::string name;  ///< Key (safetensors), file stem (.npy), or folder-relative name.
    std::string file;  ///< The file it came from.
    TensorView view;
  };
  /// Opens `spec`: a .npy or .safetensors file, "FILE:NAME" for one tensor of a safetensors
  /// file, or a folder (every .npy / .safetensors below it; names are relative paths without
  /// the extension, plus "/<key>" for safetensors). Throws genscope::Error (format errors,
  /// "NotFound", "UnknownTensorFile", "TensorNotFound").
  static TensorSet open(const std::string& spec);

  TensorSet(TensorSet&&) noexcept;
  TensorSet& operator=(TensorSet&&) noexcept;
  ~TensorSet();

  /// Items sorted by name.
  const std::vector<Item>& items() const noexcept { return items_; }
  /// Item by name; nullptr when absent.
  const Item* find(const std::string& name) const noexcept;

 private:
  struct Storage;
  TensorSet();
  std::vector<Item> items_;
  std::unique_ptr<Storage> storage_;
};

/// One row of a comparison of two tensor sets.
struct TensorSetRow {
  std::string name;
  bool in_a = false;
  bool in_b = false;
  TensorComparison result;  ///< Valid when in_a and in_b.
};

/// The comparison of two tensor sets matched by name.
struct TensorSetComparison {
  std::vector<TensorSetRow> rows;  ///< Sorted by name.
  int matched = 0;    ///< Names present on both sides.
  int differing = 0;  ///< Matched names that are not allclose (shape mismatch included).
  int only_a = 0;     ///< Names only in A.
  int only_b = 0;     ///< Names only in B.
  /// True when every name is on both sides and every pair is allclose.
  bool all_match() const noexcept { return differing == 0 && only_a == 0 && only_b == 0; }
};

/// Compares two sets by name. When each side holds exactly one tensor, they are compared
/// whatever their names.
TensorSetComparison compare_tensor_sets(const TensorSet& a, const TensorSet& b,
                                        const CompareOptions& options = {});

}  // namespace genscope
