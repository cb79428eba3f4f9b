// Element type names and sizes.
#include "genscope/dtype.hpp"

#include <array>
#include <utility>

namespace genscope {
namespace {

struct DTypeRow {
  DType dtype;
  std::string_view name;
  std::size_t size;
  bool is_float;
};

constexpr std::array<DTypeRow, 15> kRows{{
    {DType::kF64, "F64", 8, true},        {DType::kF32, "F32", 4, true},
    {DType::kF16, "F16", 2, true},        {DType::kBF16, "BF16", 2, true},
    {DType::kF8E4M3, "F8_E4M3", 1, true}, {DType::kF8E5M2, "F8_E5M2", 1, true},
    {DType::kI64, "I64", 8, false},       {DType::kI32, "I32", 4, false},
    {DType::kI16, "I16", 2, false},       {DType::kI8, "I8", 1, false},
    {DType::kU64, "U64", 8, false},       {DType::kU32, "U32", 4, false},
    {DType::kU16, "U16", 2, false},       {DType::kU8, "U8", 1, false},
    {DType::kBool, "BOOL", 1, false},
}};

const DTypeRow& row(DType dtype) noexcept { return kRows[static_cast<std::size_t>(dtype)]; }

}  // namespace

std::size_t dtype_size(DType dtype) noexcept { return row(dtype).size; }
std::string_view dtype_name(DType dtype) noexcept { return row(dtype).name; }
bool dtype_is_float(DType dtype) noexcept { return row(dtype).is_float; }

std::optional<DType> parse_dtype(std::string_view name) noexcept {
  for (const DTypeRow& r : kRows) {
    if (r.name == name) return r.dtype;
  }
  return std::nullopt;
}

}  // namespace genscope
