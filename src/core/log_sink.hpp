// LogSink: the optional text log (seed 003's text2vedio.log): timestamped lines, appended,
// each written with a single write() on an O_APPEND descriptor so lines from several threads
// or processes never interleave mid-line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace genscope::detail {

class LogSink {
 public:
  /// Opens `path` for appending; an empty path means no log. Never throws.
  explicit LogSink(const std::string& path);
  ~LogSink();
  LogSink(const LogSink&) = delete;
  LogSink& operator=(const LogSink&) = delete;

  bool enabled() const noexcept { return fd_ >= 0; }
  /// The error that prevented opening the log, if any.
  const std::string& error() const noexcept { return error_; }
  /// Writes "<UTC time> - <level> - <message>\n" in one write().
  void write(std::string_view level, std::string_view message) const noexcept;

 private:
  int fd_ = -1;
  std::string error_;
};

/// Current UTC time as ISO 8601 with milliseconds ("2026-11-21T12:00:00.123Z").
std::string utc_now_iso8601();
/// Formats a Unix time in nanoseconds as ISO 8601 UTC with milliseconds.
std::string format_utc_iso8601(std::int64_t unix_ns);

}  // namespace genscope::detail

namespace genscope {
struct StepRecord;
}

namespace genscope::detail {
/// The log line of a finished step: name, kind, status, duration and memory figures.
std::string step_log_line(const StepRecord& step);
}  // namespace genscope::detail
