// MappedFile: a read-only memory map of a whole file (private to src/formats, reusable).
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace genscope::detail {

/// A read-only, private mapping of an entire file; unmapped on destruction. Movable.
class MappedFile {
 public:
  /// Maps `path`. Throws genscope::Error("OpenFailed") naming the path and errno text.
  static MappedFile open(const std::filesystem::path& path);

  MappedFile() noexcept = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  /// The mapped bytes (empty for an empty file).
  std::span<const std::byte> bytes() const noexcept {
    return {static_cast<const std::byte*>(data_), size_bytes_};
  }

 private:
  void reset() noexcept;
  void* data_ = nullptr;
  std::size_t size_bytes_ = 0;
};

}  // namespace genscope::detail
