// LogFollower: follows a growing log file like `tail -F` (genscope watch --log FILE): new
// bytes as they are appended, a truncated file (copytruncate rotation) read again from its
// start, a renamed/replaced file (create rotation) finished and the new one at the path
// followed from its start. A FIFO (named pipe) is read as it comes, without blocking: its
// opening does not wait for a writer, and a poll() with no writer or no data returns at once.
//
// Example:
//   genscope::LogFollower log("/var/log/comfyui.log");  // ReadFailed when unreadable
//   std::string bytes;
//   for (;;) { log.poll(bytes); session.output(1, bytes, now); bytes.clear(); sleep(...); }
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace genscope {

/// What one LogFollower::poll() saw.
struct LogPoll {
  std::size_t bytes = 0;   ///< Bytes appended to the output.
  bool truncated = false;  ///< The file shrank: it is read again from its start.
  bool rotated = false;    ///< A different file now has the path: followed from its start.
  std::string error;       ///< Why the path cannot be read now (it is retried); empty if fine.
};

/// Follows one log file by path.
class LogFollower {
 public:
  /// Opens `path` and starts at its current end (only what is written from now on).
  /// Throws genscope::Error("ReadFailed") with the path and the errno text.
  explicit LogFollower(std::filesystem::path path);
  ~LogFollower();
  LogFollower(const LogFollower&) = delete;
  LogFollower& operator=(const LogFollower&) = delete;

  /// Appends to `out` what was written since the previous call (at most `max_bytes`; the
  /// rest comes with the next call).
  LogPoll poll(std::string& out, std::size_t max_bytes = 1 << 20);
  /// The file's path.
  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  bool fifo_ = false;  // a named pipe: read(), no offsets, no rotation
  std::uint64_t offset_ = 0;
  dev_t device_ = 0;
  ino_t inode_ = 0;
};

}  // namespace genscope
