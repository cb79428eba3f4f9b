// The text of a step's log line.
#include <cmath>

#include "core/log_sink.hpp"
#include "genscope/report.hpp"
#include "genscope/run.hpp"

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

}  // namespace genscope::detail
