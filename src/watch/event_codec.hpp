// The event channel's line format (docs/run.md, "Event channel"): one JSON object per line,
// written by the watched program on the descriptor named by GENSCOPE_EVENTS_FD.
//
//   {"event":"begin","kind":"sampling","name":"denoise"}        opens a step
//   {"event":"iteration"}  {"event":"iteration","n":4,"duration_s":0.8}
//   {"event":"counter","name":"frames","value":16}
//   {"event":"attempt","strategy":"tiled","outcome":"ok","duration_s":1.5}
//   {"event":"label","key":"seed","value":"42"}
//   {"event":"end"}  {"event":"end","name":"denoise","status":"failed","error":"OOM"}
//   {"event":"run_begin","name":"job 7","pipeline":{...},"labels":{...}}  {"event":"run_end"}
//   {"event":"step","ref":"…","start_steady_ns":…,"step":{…}}   a finished in-process step
//
// parse_event() checks one line and throws genscope::Error("InvalidEvent") naming the field;
// the encode_* functions write the lines an in-process Monitor forwards.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "genscope/run.hpp"

namespace genscope::watch {

/// The event types.
enum class EventType { kBegin, kEnd, kIteration, kCounter, kAttempt, kLabel, kRunBegin, kRunEnd, kStep };

/// One event-channel line, checked.
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

/// Longest event line accepted (a forwarded step with large attachments fits).
inline constexpr std::size_t kMaxEventLineBytes = 16 * 1024 * 1024;

/// Parses one line (without its '\n'). Throws genscope::Error("InvalidEvent").
Event parse_event(std::string_view line);

/// A forwarded step's begin line (no trailing '\n').
std::string encode_begin(const StepRecord& step, std::string_view ref);
/// A forwarded finished step (no trailing '\n').
std::string encode_step(const StepRecord& step, std::string_view ref, std::int64_t start_steady_ns);
/// A forwarded run's begin line.
std::string encode_run_begin(const Run& run);
/// A forwarded run's end line: its run-level attachments (except "usage"), notes, errors.
std::string encode_run_end(const Run& run);

}  // namespace genscope::watch
