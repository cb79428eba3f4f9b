// The .npy header: the Python dict literal parser and the descr <-> DType mapping.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "genscope/dtype.hpp"

namespace genscope::detail {

/// The three header fields of a .npy file.
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
};

/// Parses the dict literal (keys exactly descr, fortran_order, shape; trailing whitespace
/// allowed). Throws genscope::Error("NpyHeaderInvalid") naming the header offset.
NpyHeader parse_npy_header(std::string_view text);

/// A descr resolved to an element type and byte order.
struct NpyDescr {
  DType dtype;
  bool big_endian;  ///< Multi-byte elements stored big endian ('>').
};

/// Maps a descr ('<f4', '>i8', '|b1', ...); nullopt for anything genscope has no type for.
std::optional<NpyDescr> parse_npy_descr(std::string_view descr) noexcept;

/// The descr write_npy uses for `dtype` (raw-bits descr for BF16/F8).
std::string_view npy_descr(DType dtype) noexcept;

/// True when NumPy has no type for `dtype` and a sidecar records it.
bool npy_needs_sidecar(DType dtype) noexcept;

}  // namespace genscope::detail
