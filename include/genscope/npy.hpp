// NumPy .npy files: a strict reader (versions 1.0, 2.0, 3.0) and an atomic writer.
//
// Layout (NumPy format spec, numpy/lib/format.py):
//
//   +---------+-------+-------+------------------+-----------------------------+------------+
//   | \x93NUMPY | major | minor | header length    | header: Python dict literal | data       |
//   | 6 bytes | u8    | u8    | u16 LE (v1)      | {'descr': '<f4',            | C order, or|
//   |         |       |       | u32 LE (v2, v3)  |  'fortran_order': False,    | Fortran    |
//   |         |       |       |                  |  'shape': (2, 3), }  ...\n  | order      |
//   +---------+-------+-------+------------------+-----------------------------+------------+
//   v1/v2 headers are latin-1, v3 UTF-8; NumPy pads the header with spaces so that the data
//   starts at a multiple of 64 bytes.
//
// BF16 and FP8 have no NumPy descr: write_npy stores their raw bits as '<u2' / '|u1' and
// writes a sidecar `<path>.dtype.json` = {"dtype": "BF16"}; read_npy restores the dtype
// from the sidecar. Errors are genscope::Error with stable names (NpyBadMagic, ...); see
// docs/formats.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "genscope/dtype.hpp"
#include "genscope/error.hpp"
#include "genscope/tensor_view.hpp"

namespace genscope {

namespace detail {
struct NpyArrayAccess;  // builds NpyArray values inside src/formats
}  // namespace detail

/// An array read from a .npy file. Owns its bytes (a memory map or a buffer). Movable.
class NpyArray {
 public:
  NpyArray(NpyArray&&) noexcept;
  NpyArray& operator=(NpyArray&&) noexcept;
  ~NpyArray();

  /// A view of the data (device "cpu"); Fortran-order files give reversed strides.
  TensorView view() const;
  /// The element type (the sidecar's dtype when one was applied).
  DType dtype() const noexcept;
  /// The shape as written in the header.
  const std::vector<std::int64_t>& shape() const noexcept;
  /// True when the file stores the data in Fortran (column-major) order.
  bool fortran_order() const noexcept;
  /// The major format version read: 1, 2 or 3.
  int version() const noexcept;
  /// The descr string as written in the file, e.g. "<f4" or ">i8".
  const std::string& descr() const noexcept;
  /// The data bytes in native byte order, in file element order.
  std::span<const std::byte> bytes() const noexcept;

 private:
  struct Impl;
  explicit NpyArray(std::unique_ptr<Impl> impl) noexcept;
  friend struct detail::NpyArrayAccess;
  std::unique_ptr<Impl> impl_;
};

/// Maps and validates a .npy file; applies `<path>.dtype.json` when present.
/// Throws genscope::Error (NpyBadMagic, NpyTruncated, ...; OpenFailed).
NpyArray read_npy(const std::filesystem::path& path);

/// Validates and copies a .npy image held in memory. `stored_dtype` plays the sidecar's role
/// (reinterprets unsigned raw bits as BF16/F8). Throws genscope::Error.
NpyArray parse_npy(std::span<const std::byte> bytes,
                   std::optional<DType> stored_dtype = std::nullopt);

/// Writes `view` (any strides; copied to C order) as a .npy file, atomically: v1.0 header,
/// v2.0 when the header exceeds 65535 bytes, data 64-byte aligned. BF16/F8 are written as
/// raw bits plus the `<path>.dtype.json` sidecar; otherwise a stale sidecar is removed.
/// Throws genscope::Error("WriteFailed", "InvalidShape").
void write_npy(const std::filesystem::path& path, const TensorView& view);

/// The sidecar path for a .npy path: `<path>.dtype.json`.
std::filesystem::path npy_sidecar_path(const std::filesystem::path& path);

}  // namespace genscope
