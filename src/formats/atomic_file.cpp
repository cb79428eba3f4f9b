// AtomicFile: temporary file + fsync + rename + fsync(folder).
#include "formats/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "genscope/error.hpp"

namespace genscope::detail {

AtomicFile::AtomicFile(std::filesystem::path target) : target_(std::move(target)) {
  std::filesystem::path dir = target_.parent_path();
  if (dir.empty()) dir = ".";
  std::string temp_name(1, '.');  // appended piecewise: "." + string trips GCC 12 -Wrestrict
  temp_name += target_.filename().string();
  temp_name += ".tmp.XXXXXX";
  const std::string pattern = (dir / temp_name).string();
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  fd_ = ::mkostemp(buf.data(), O_CLOEXEC);
  if (fd_ < 0) fail("create a temporary file for", errno);
  temp_ = std::filesystem::path(buf.data());
  // mkstemp creates 0600; give the result the usual permissions of a data file.
  ::fchmod(fd_, 0644);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
}

void AtomicFile::fail(const char* what, int err) const {
  throw Error("WriteFailed",
              "cannot " + std::string(what) + " '" + target_.string() + "': " + std::strerror(err));
}

void AtomicFile::write(std::span<const std::byte> bytes) {
  const std::byte* p = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write", errno);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  size_bytes_ += bytes.size();
}

void AtomicFile::write(std::string_view text) {
  write(std::as_bytes(std::span<const char>(text.data(), text.size())));
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0) fail("fsync", errno);
  if (::close(fd_) != 0) {
    fd_ = -1;
    fail("close", errno);
  }
  fd_ = -1;
  if (::rename(temp_.c_str(), target_.c_str()) != 0) fail("rename a temporary file onto", errno);
  committed_ = true;
  std::filesystem::path dir = target_.parent_path();
  if (dir.empty()) dir = ".";
  // Make the rename itself durable. A folder that cannot be opened or synced (some network
  // file systems) does not undo a completed rename, so that is not an error.
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

void write_file_atomically(const std::filesystem::path& target, std::span<const std::byte> bytes) {
  AtomicFile file(target);
  file.write(bytes);
  file.commit();
}

}  // namespace genscope::detail
