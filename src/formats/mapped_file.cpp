// MappedFile: mmap(2) of a whole file, read-only.
#include "formats/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "genscope/error.hpp"

namespace genscope::detail {
namespace {

[[noreturn]] void throw_open_failed(const std::filesystem::path& path, const char* what, int err) {
  throw Error("OpenFailed",
              "cannot " + std::string(what) + " '" + path.string() + "': " + std::strerror(err));
}

}  // namespace

MappedFile MappedFile::open(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_open_failed(path, "open", errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw_open_failed(path, "stat", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error("OpenFailed", "'" + path.string() + "' is not a regular file");
  }
  MappedFile file;
  file.size_bytes_ = static_cast<std::size_t>(st.st_size);
  if (file.size_bytes_ > 0) {
    void* data = ::mmap(nullptr, file.size_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw_open_failed(path, "mmap", err);
    }
    file.data_ = data;
  }
  ::close(fd);  // the mapping keeps the file referenced
  return file;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_bytes_(std::exchange(other.size_bytes_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_bytes_ = std::exchange(other.size_bytes_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() { reset(); }

void MappedFile::reset() noexcept {
  if (data_ != nullptr) ::munmap(data_, size_bytes_);
  data_ = nullptr;
  size_bytes_ = 0;
}

}  // namespace genscope::detail
