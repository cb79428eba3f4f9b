// LogFileSink: timestamped, whole-line appends of run, step and monitoring-error events.
#include "sinks/log_file_sink.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "core/utc_time.hpp"
#include "genscope/error.hpp"
#include "genscope/report.hpp"

namespace genscope::detail {

std::string step_log_line(const StepRecord& step) {
  std::string line = "step end: " + step.name + " (" + std::string(to_string(step.kind)) +
                     ") status=" + std::string(to_string(step.status)) +
                     " duration=" + format_duration(static_cast<double>(step.duration_ns), true);
  for (const MetricFigures& m : step.metrics) {
    if (m.unit != Unit::kBytes || std::isnan(m.after)) continue;
    line += " " + m.name + "=" + format_bytes(m.after) + " (" + format_bytes(m.delta(), true) +
            ", peak " + format_bytes(m.peak) + ")";
  }
  if (!step.iteration_ns.empty()) {
    const IterationStats it = summarize_iterations(step.iteration_ns);
    line += " iterations=" + std::to_string(it.count) + " it/s=" +
            std::to_string(it.iterations_per_second);
  }
  if (!step.error_message.empty()) line += " error=\"" + step.error_message + "\"";
  return line;
}

LogFileSink::LogFileSink(const std::string& path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) error_ = "cannot open log file " + path + ": " + std::strerror(errno);
}

LogFileSink::~LogFileSink() {
  if (fd_ >= 0) ::close(fd_);
}

void LogFileSink::write(std::int64_t unix_ns, std::string_view level,
                        std::string_view message) const {
  if (fd_ < 0) return;
  std::string line = format_utc_iso8601(unix_ns);
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
    if (n <= 0) throw Error("WriteFailed", std::string("log file: ") + std::strerror(errno));
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

void LogFileSink::run_started(const Run& run) {
  if (fd_ < 0) throw Error("LogUnavailable", error_);
  run_start_unix_ns_ = run.start_unix_ns;
  byte_columns_.clear();
  for (std::size_t i = 0; i < run.series.metrics.size() && i < run.series.units.size(); ++i) {
    const std::string& m = run.series.metrics[i];
    // Totals, free and available memory are not what a run "peaked" at.
    if (run.series.units[i] != Unit::kBytes || m.find("total") != std::string::npos ||
        m.find("free") != std::string::npos || m.find("available") != std::string::npos) {
      continue;
    }
    byte_columns_.push_back(m);
  }
  write(run.start_unix_ns, "INFO",
        "run " + run.id + " started: pipeline=" + run.pipeline.name + " model=" + run.pipeline.model);
}

void LogFileSink::step_began(const StepRecord& step) {
  write(run_start_unix_ns_ + step.start_offset_ns, "INFO",
        "step start: " + step.name + " (" + std::string(to_string(step.kind)) + ")");
}

void LogFileSink::step_ended(const StepRecord& step) {
  write(run_start_unix_ns_ + step.start_offset_ns + step.duration_ns, "INFO", step_log_line(step));
}

void LogFileSink::monitoring_error(const MonitoringError& error) {
  write(run_start_unix_ns_ + error.offset_ns, "WARNING",
        "monitoring error [" + error.source + "] " + error.message);
}

void LogFileSink::run_finished(const Run& run) {
  // Seed 003's usage statistics line: totals and the run's peaks.
  std::string line = "run " + run.id + " finished: steps=" + std::to_string(run.steps.size()) +
                     " duration=" + format_duration(static_cast<double>(run.duration_ns), true);
  for (const std::string& m : byte_columns_) {
    const double peak = run.peak(m);
    if (!std::isnan(peak)) line += " peak " + m + "=" + format_bytes(peak);
  }
  line += " monitoring_errors=" + std::to_string(run.monitoring_errors.size());
  write(run.start_unix_ns + run.duration_ns, "INFO", line);
}

}  // namespace genscope::detail
