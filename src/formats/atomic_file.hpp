// AtomicFile: write a file so that it appears whole or not at all (private to src/formats).
//
// Bytes go to a temporary file in the target's folder (same file system, so rename(2) is
// atomic); commit() fsyncs it, renames it over the target and fsyncs the folder. If the
// object is destroyed without commit() (an exception, an early return), the temporary file
// is removed and the target is untouched.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string_view>

namespace genscope::detail {

/// A temporary file that becomes `target` on commit(). Not copyable, not movable.
class AtomicFile {
 public:
  /// Creates the temporary file. Throws genscope::Error("WriteFailed").
  explicit AtomicFile(std::filesystem::path target);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  /// Removes the temporary file unless committed.
  ~AtomicFile();

  /// Appends bytes. Throws genscope::Error("WriteFailed").
  void write(std::span<const std::byte> bytes);
  /// Appends text.
  void write(std::string_view text);
  /// fsync, rename over the target, fsync the folder. Throws genscope::Error("WriteFailed").
  void commit();
  /// Bytes written so far.
  std::size_t size_bytes() const noexcept { return size_bytes_; }

 private:
  [[noreturn]] void fail(const char* what, int err) const;
  std::filesystem::path target_;
  std::filesystem::path temp_;
  int fd_ = -1;
  std::size_t size_bytes_ = 0;
  bool committed_ = false;
};

/// Writes `bytes` to `target` atomically in one go.
void write_file_atomically(const std::filesystem::path& target, std::span<const std::byte> bytes);

}  // namespace genscope::detail
