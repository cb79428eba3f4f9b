// LogFollower: tail -F over one path (see log_follower.hpp).
//
// Each poll(): fstat the open file — shorter than our offset means truncation (read again
// from 0); read up to its size. Then stat the path — another inode (or a missing path) means
// rotation: the old file was read to its end above, so switch to the new file at offset 0
// (a path that does not exist yet is retried on the next poll).
#include "genscope/log_follower.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "genscope/error.hpp"

namespace genscope {

LogFollower::LogFollower(std::filesystem::path path) : path_(std::move(path)) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (genscope watch would hang at start).
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat st {};
  if (fd_ < 0 || ::fstat(fd_, &st) != 0) {
    const std::string why = std::strerror(errno);
    if (fd_ >= 0) ::close(fd_);
    throw Error("ReadFailed", "cannot read log file " + path_.string() + ": " + why);
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd_);
    throw Error("ReadFailed", "cannot read log file " + path_.string() + ": Is a directory");
  }
  fifo_ = S_ISFIFO(st.st_mode);
  offset_ = fifo_ ? 0 : static_cast<std::uint64_t>(st.st_size);
  device_ = st.st_dev;
  inode_ = st.st_ino;
}

LogFollower::~LogFollower() {
  if (fd_ >= 0) ::close(fd_);
}

LogPoll LogFollower::poll(std::string& out, std::size_t max_bytes) {
  LogPoll result;
  if (fifo_) {  // what is there now; 0 (no writer) and EAGAIN (no data) both end the poll
    while (result.bytes < max_bytes) {
      const std::size_t want = std::min<std::size_t>(max_bytes - result.bytes, 1 << 16);
      const std::size_t old = out.size();
      out.resize(old + want);
      const ssize_t n = ::read(fd_, out.data() + old, want);
      out.resize(old + static_cast<std::size_t>(n > 0 ? n : 0));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      result.bytes += static_cast<std::size_t>(n);
    }
    return result;
  }
  auto read_available = [&] {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) return;
    const auto size = static_cast<std::uint64_t>(st.st_size);
    if (size < offset_) {
      offset_ = 0;
      result.truncated = true;
    }
    while (offset_ < size && result.bytes < max_bytes) {
      const std::size_t want = static_cast<std::size_t>(
          std::min<std::uint64_t>(size - offset_, max_bytes - result.bytes));
      const std::size_t old = out.size();
      out.resize(old + want);
      const ssize_t n = ::pread(fd_, out.data() + old, want, static_cast<off_t>(offset_));
      if (n <= 0) {
        out.resize(old);
        if (n < 0 && errno == EINTR) continue;
        return;
      }
      out.resize(old + static_cast<std::size_t>(n));
      offset_ += static_cast<std::uint64_t>(n);
      result.bytes += static_cast<std::size_t>(n);
    }
  };
  read_available();
  if (result.bytes >= max_bytes) return result;  // more to come: no rotation check yet
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    result.error = "cannot read log file " + path_.string() + ": " + std::strerror(errno);
    return result;  // moved away, the new one not created yet: keep the old one
  }
  if (st.st_dev == device_ && st.st_ino == inode_) return result;
  // Rotated: what the writer added to the old file between our read and the rename is read
  // now, before the switch (nothing more can come: the writer has moved to the new file).
  read_available();
  if (result.bytes >= max_bytes) return result;  // the rest of the old file on the next poll
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    result.error = "cannot read log file " + path_.string() + ": " + std::strerror(errno);
    return result;
  }
  ::close(fd_);
  fd_ = fd;
  offset_ = 0;
  device_ = st.st_dev;
  inode_ = st.st_ino;
  result.rotated = true;
  read_available();
  return result;
}

}  // namespace genscope
