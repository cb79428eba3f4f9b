// The append-only text log.
#include "core/log_sink.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

namespace genscope::detail {

std::string format_utc_iso8601(std::int64_t unix_ns) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ns / 1'000'000'000);
  const int millis = static_cast<int>((unix_ns / 1'000'000) % 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
  return buf;
}

std::string utc_now_iso8601() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return format_utc_iso8601(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count());
}

LogSink::LogSink(const std::string& path) {
  if (path.empty()) return;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) error_ = "cannot open log file " + path + ": " + std::strerror(errno);
}

LogSink::~LogSink() {
  if (fd_ >= 0) ::close(fd_);
}

void LogSink::write(std::string_view level, std::string_view message) const noexcept {
  if (fd_ < 0) return;
  try {
    std::string line = utc_now_iso8601();
    line += " - ";
    line += level;
    line += " - ";
    line += message;
    line += '\n';
    // O_APPEND makes each write() atomic with respect to the file offset; one call per line.
    const char* p = line.data();
    std::size_t left = line.size();
    while (left > 0) {
      const ssize_t n = ::write(fd_, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      p += n;
      left -= static_cast<std::size_t>(n);
    }
  } catch (...) {
    // Logging must never disturb the pipeline.
  }
}

}  // namespace genscope::detail
