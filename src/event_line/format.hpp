// The event-line wire format (docs/run.md, "Event channel"): one JSON object per line, written
// by a watched program on the pipe whose descriptor `genscope run` puts in GENSCOPE_EVENTS_FD,
// read by the watch engine. This header is the format's one definition: the environment
// variables, the line limit, the event names and the field names. The in-process sink
// (src/sinks/event_channel_sink.cpp) writes with encode.hpp, the watch engine
// (src/watch/watch_session.cpp) reads with decode.hpp, the child-process side
// (src/process/child_process.cpp) splits lines with kMaxLineBytes.
//
//   {"event":"begin","kind":"sampling","name":"denoise"}        opens a step
//   {"event":"iteration"}  {"event":"iteration","n":4,"duration_s":0.8}
//   {"event":"counter","name":"frames","value":16}
//   {"event":"attempt","strategy":"tiled","outcome":"ok","duration_s":1.5}
//   {"event":"label","key":"seed","value":"42"}
//   {"event":"end"}  {"event":"end","name":"denoise","status":"failed","error":"OOM"}
//   {"event":"run_begin","name":"job 7","pipeline":{...},"labels":{...}}  {"event":"run_end"}
//   {"event":"step","ref":"…","start_steady_ns":…,"step":{…}}   a finished in-process step
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace genscope::event_line {

/// The variable naming the descriptor a watched program writes its lines on.
inline constexpr std::string_view kFdVariable = "GENSCOPE_EVENTS_FD";
/// The variable holding that pipe's identity (channel_id.hpp), so a stale GENSCOPE_EVENTS_FD
/// is never written into.
inline constexpr std::string_view kIdVariable = "GENSCOPE_EVENTS_ID";

/// Longest line accepted, without its '\n' (a forwarded step with large attachments fits).
inline constexpr std::size_t kMaxLineBytes = 16 * 1024 * 1024;

/// The event types ("event" field).
enum class EventType {
  kBegin,
  kEnd,
  kIteration,
  kCounter,
  kAttempt,
  kLabel,
  kRunBegin,
  kRunEnd,
  kStep
};

/// The "event" value of a type ("begin", "run_end", ...).
std::string_view to_string(EventType type);
/// The type an "event" value names, or nullopt.
std::optional<EventType> parse_event_type(std::string_view name);

/// Field names (a field's meaning depends on the event, event.hpp says which).
namespace field {
inline constexpr char kEvent[] = "event";
inline constexpr char kRef[] = "ref";  // pairs a forwarded begin with its step
inline constexpr char kName[] = "name";
inline constexpr char kKind[] = "kind";
inline constexpr char kSource[] = "source";
inline constexpr char kStep[] = "step";
inline constexpr char kStatus[] = "status";
inline constexpr char kError[] = "error";
inline constexpr char kErrorType[] = "error_type";
inline constexpr char kN[] = "n";
inline constexpr char kDurationS[] = "duration_s";
inline constexpr char kValue[] = "value";
inline constexpr char kStrategy[] = "strategy";
inline constexpr char kOutcome[] = "outcome";
inline constexpr char kKey[] = "key";
inline constexpr char kScope[] = "scope";
inline constexpr char kPipeline[] = "pipeline";
inline constexpr char kLabels[] = "labels";
inline constexpr char kAttachments[] = "attachments";
inline constexpr char kNotes[] = "notes";
inline constexpr char kMonitoringErrors[] = "monitoring_errors";
inline constexpr char kStartSteadyNs[] = "start_steady_ns";
// Inside "pipeline".
inline constexpr char kModel[] = "model";
inline constexpr char kArchitecture[] = "architecture";
inline constexpr char kParameters[] = "parameters";
// Inside an attachment of "attachments".
inline constexpr char kType[] = "type";
inline constexpr char kData[] = "data";
// Inside a monitoring error of "monitoring_errors" (also "source", "step").
inline constexpr char kMessage[] = "message";
}  // namespace field

/// Values of a label's "scope".
inline constexpr std::string_view kScopeRun = "run";
inline constexpr std::string_view kScopeStep = "step";

/// The run_begin label an in-process monitor adds: its run's id (the run was forwarded).
inline constexpr char kForwardedRunIdLabel[] = "inprocess.run_id";

}  // namespace genscope::event_line
