// One event line, decoded and checked (decode.hpp): the fields each event type carries.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "event_line/format.hpp"
#include "genscope/run.hpp"

namespace genscope::event_line {

/// One event line, checked.
struct Event {
  EventType type = EventType::kBegin;
  std::string name;              ///< begin/end: step name; counter: counter name; run_begin: run
  std::string ref;               ///< pairs a forwarded begin with its step/end
  std::string step;              ///< iteration/counter/attempt/label/end: target step name
  StepKind kind = StepKind::kCustom;
  std::string source;            ///< begin: where in the program
  std::optional<StepStatus> status;  ///< end: ok/failed/skipped
  std::string error;             ///< end: failure message; attempt: why it failed
  std::string error_type;        ///< end: exception type
  std::int64_t n = 1;            ///< iteration: how many
  std::optional<double> duration_s;  ///< iteration: their total time; attempt: its time
  double value = 0;              ///< counter
  std::string key, text;         ///< label key and value
  bool run_scope = false;        ///< label: on the run rather than a step
  std::string strategy;          ///< attempt
  StepStatus outcome = StepStatus::kOk;  ///< attempt
  PipelineInfo pipeline;         ///< run_begin
  std::map<std::string, std::string> labels;  ///< run_begin
  std::vector<Attachment> attachments;        ///< run_end (forwarded run's analyses)
  std::vector<std::string> notes;             ///< run_end
  std::vector<MonitoringError> errors;        ///< run_end
  StepRecord record;             ///< step
  std::optional<std::int64_t> start_steady_ns;  ///< step
};

}  // namespace genscope::event_line
