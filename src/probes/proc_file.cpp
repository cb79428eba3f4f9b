// ProcFile and the procfs parsers (see proc_file.hpp for the formats).
#include "probes/proc_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace genscope::detail {

ProcFile& ProcFile::operator=(ProcFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

ProcFile::~ProcFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::string ProcFile::open(const char* path, int flags) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = ::open(path, flags | O_CLOEXEC);
  if (fd_ < 0) return std::string("cannot open ") + path + ": " + errno_text(errno);
  return {};
}

long ProcFile::read_into(char* buffer, std::size_t capacity) const noexcept {
  ssize_t n;
  do {
    n = ::pread(fd_, buffer, capacity, 0);
  } while (n < 0 && errno == EINTR);
  return n < 0 ? -errno : static_cast<long>(n);
}

int ProcFile::write_text(std::string_view text) const noexcept {
  ssize_t n;
  do {
    n = ::pwrite(fd_, text.data(), text.size(), 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return -errno;
  return n == static_cast<ssize_t>(text.size()) ? 0 : -EIO;
}

std::optional<std::uint64_t> parse_decimal(std::string_view text, std::size_t& pos) noexcept {
  while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t')) ++pos;
  if (pos >= text.size() || text[pos] < '0' || text[pos] > '9') return std::nullopt;
  std::uint64_t value = 0;
  while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
    const std::uint64_t digit = static_cast<std::uint64_t>(text[pos] - '0');
    if (value > (UINT64_MAX - digit) / 10) return std::nullopt;  // overflow
    value = value * 10 + digit;
    ++pos;
  }
  return value;
}

std::optional<std::uint64_t> parse_statm_resident_pages(std::string_view text) noexcept {
  std::size_t pos = 0;
  if (!parse_decimal(text, pos)) return std::nullopt;  // size
  return parse_decimal(text, pos);                     // resident
}

std::optional<std::uint64_t> parse_kb_field(std::string_view text, std::string_view key) noexcept {
  std::size_t line = 0;
  while (line < text.size()) {
    const std::string_view rest = text.substr(line);
    if (rest.size() > key.size() && rest.compare(0, key.size(), key) == 0 &&
        rest[key.size()] == ':') {
      std::size_t pos = key.size() + 1;
      const auto kb = parse_decimal(rest, pos);
      if (!kb || *kb > UINT64_MAX / 1024) return std::nullopt;
      return *kb * 1024;
    }
    const std::size_t newline = text.find('\n', line);
    if (newline == std::string_view::npos) break;
    line = newline + 1;
  }
  return std::nullopt;
}

std::optional<ProcStat> parse_proc_stat(std::string_view text) noexcept {
  const std::size_t open = text.find('(');
  const std::size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open)
    return std::nullopt;
  ProcStat stat;
  stat.comm = text.substr(open + 1, close - open - 1);
  // ") S ppid ...": field 3 is the state, then numeric fields 4.. (some may be negative).
  std::size_t pos = close + 1;
  if (pos + 2 >= text.size() || text[pos] != ' ') return std::nullopt;
  stat.state = text[pos + 1];
  pos += 2;
  const auto ppid = parse_decimal(text, pos);
  if (!ppid) return std::nullopt;
  stat.ppid = *ppid;
  // Skip fields 5..21 (17 tokens) to reach starttime (22).
  for (int field = 5; field <= 21; ++field) {
    while (pos < text.size() && text[pos] == ' ') ++pos;
    if (pos >= text.size()) return std::nullopt;
    while (pos < text.size() && text[pos] != ' ') ++pos;
  }
  const auto start = parse_decimal(text, pos);
  if (!start) return std::nullopt;
  stat.start_ticks = *start;
  return stat;
}

std::string errno_text(int errno_value) {
  char buffer[256];
  // GNU strerror_r returns the message pointer (which may or may not be `buffer`).
  const char* message = ::strerror_r(errno_value, buffer, sizeof buffer);
  return message ? std::string(message) : std::string("errno ") + std::to_string(errno_value);
}

}  // namespace genscope::detail
