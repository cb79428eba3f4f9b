// LogFileSink: the optional text log (seed 003's text2vedio.log) as a live-event sink.
//
// Each event becomes one line "<UTC time> - <LEVEL> - <message>\n", appended with a single
// write() on an O_APPEND descriptor, so lines from several threads or processes never
// interleave mid-line. Times are the events' own times (run start + offset), not the time the
// dispatcher wrote them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "genscope/sink.hpp"

namespace genscope::detail {

class LogFileSink final : public Sink {
 public:
  /// Opens `path` for appending; a failure is reported as a monitoring error of each run.
  explicit LogFileSink(const std::string& path);
  ~LogFileSink() override;
  LogFileSink(const LogFileSink&) = delete;
  LogFileSink& operator=(const LogFileSink&) = delete;

  std::string name() const override { return "log"; }
  unsigned events() const override { return kRunEvents | kStepEvents | kErrorEvents; }
  void run_started(const Run& run) override;
  void step_began(const StepRecord& step) override;
  void step_ended(const StepRecord& step) override;
  void monitoring_error(const MonitoringError& error) override;
  void run_finished(const Run& run) override;

 private:
  void write(std::int64_t unix_ns, std::string_view level, std::string_view message) const;
  int fd_ = -1;
  std::string error_;
  std::int64_t run_start_unix_ns_ = 0;
  std::vector<std::string> byte_columns_;  // the run's byte-valued series columns
};

/// The log line of a finished step: name, kind, status, duration and memory figures.
std::string step_log_line(const StepRecord& step);

}  // namespace genscope::detail
