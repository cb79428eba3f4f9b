// safetensors files: a strict, memory-mapped reader and an atomic writer.
//
// Layout (little endian):
//
//   +----------------+---------------------------+-----------------------------------+
//   | u64 N          | N bytes of UTF-8 JSON      | data section                      |
//   | header length  | {"name": {"dtype": "F32",  | tensors back to back, offsets     |
//   |                |  "shape": [..],            | relative to the start of this     |
//   |                |  "data_offsets": [b, e]},  | section, contiguous from 0, no    |
//   |                |  "__metadata__": {k: "v"}} | gaps, no trailing bytes           |
//   +----------------+---------------------------+-----------------------------------+
//
// Every violation is a genscope::Error with a stable name (HeaderTooLarge, InvalidOffset,
// ...), checked in a fixed order; see docs/formats.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "genscope/dtype.hpp"
#include "genscope/error.hpp"
#include "genscope/tensor_view.hpp"

namespace genscope {

/// One tensor entry of a safetensors header.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  ///< Offset of the first byte, relative to the data section.
  std::uint64_t end = 0;    ///< One past the last byte, relative to the data section.
  std::uint64_t nbytes() const noexcept { return end - begin; }
};

/// A validated safetensors file, memory-mapped (or a caller-owned buffer). Movable.
class SafetensorsFile {
 public:
  /// Maps and validates a file. Throws genscope::Error on any violation.
  static SafetensorsFile open(const std::filesystem::path& path);
  /// Validates a caller-owned buffer (kept alive by the caller). Throws genscope::Error.
  static SafetensorsFile parse(std::span<const std::byte> bytes);

  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  ~SafetensorsFile();

  /// Entries in data-offset order.
  const std::vector<SafetensorsEntry>& entries() const noexcept;
  /// Entry by name; nullptr when absent.
  const SafetensorsEntry* find(std::string_view name) const noexcept;
  /// The `__metadata__` map (string values only).
  const std::map<std::string, std::string>& metadata() const noexcept;
  /// The bytes of one tensor.
  std::span<const std::byte> bytes(const SafetensorsEntry& entry) const noexcept;
  /// A view of one tensor (device "cpu").
  TensorView view(const SafetensorsEntry& entry) const;
  /// Total file size in bytes and the JSON header length.
  std::uint64_t file_size() const noexcept;
  std::uint64_t header_size() const noexcept;

 private:
  struct Impl;
  explicit SafetensorsFile(std::unique_ptr<Impl> impl) noexcept;
  std::unique_ptr<Impl> impl_;
};

/// One tensor to write: its layout and a function that fills its bytes. The writer calls
/// `fill` once, in entry order, with a buffer of exactly numel * dtype_size bytes.
struct SafetensorsSource {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::function<void(std::span<std::byte>)> fill;
  /// Optional streaming form of `fill` (used instead of it when set): the writer asks for the
  /// tensor in consecutive parts of `part_bytes` (the last one shorter), each given with its
  /// byte offset in the tensor, and writes each at once while it is still in cache.
  std::function<void(std::uint64_t offset, std::span<std::byte> part)> fill_part;
  /// Size of the parts fill_part is asked for (> 0 when fill_part is set).
  std::uint64_t part_bytes = 0;
};

/// Writes a safetensors file atomically (temporary file, fsync, rename): either the whole
/// file appears or nothing does. Throws genscope::Error("WriteFailed", "DuplicateKey", ...);
/// an exception from a `fill` aborts the write and leaves no file behind.
void write_safetensors(const std::filesystem::path& path,
                       const std::vector<SafetensorsSource>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

/// Convenience: a source that copies a contiguous view.
SafetensorsSource safetensors_source(std::string name, const TensorView& view);

}  // namespace genscope
