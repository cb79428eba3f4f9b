// Writing event lines: what an in-process Monitor forwards (encode.hpp).
#include "event_line/encode.hpp"

#include <nlohmann/json.hpp>

#include "event_line/format.hpp"
#include "genscope/run_json.hpp"

namespace genscope::event_line {

using nlohmann::json;

namespace {

// One line: compact JSON, invalid UTF-8 replaced (a step name taken from a byte string must
// not make the line unreadable), no '\n' inside (JSON escapes it).
std::string to_line(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string event_name(EventType type) { return std::string(to_string(type)); }

}  // namespace

std::string forwarded_ref(int pid, int monitor, std::uint64_t run, int step_id) {
  return std::to_string(pid) + "." + std::to_string(monitor) + ":" + std::to_string(run) + ":" +
         std::to_string(step_id);
}

std::string encode_begin(const StepRecord& step, std::string_view ref) {
  json j = {{field::kEvent, event_name(EventType::kBegin)},
            {field::kKind, std::string(to_string(step.kind))},
            {field::kName, step.name},
            {field::kRef, std::string(ref)}};
  if (!step.source.empty()) j[field::kSource] = step.source;
  return to_line(j);
}

std::string encode_step(const StepRecord& step, std::string_view ref,
                        std::int64_t start_steady_ns) {
  json j = {{field::kEvent, event_name(EventType::kStep)},
            {field::kRef, std::string(ref)},
            {field::kStartSteadyNs, start_steady_ns},
            {field::kStep, to_json(step)}};
  return to_line(j);
}

std::string encode_run_begin(const Run& run) {
  json j = {{field::kEvent, event_name(EventType::kRunBegin)},
            {field::kName, run.pipeline.name},
            {field::kPipeline,
             {{field::kName, run.pipeline.name},
              {field::kModel, run.pipeline.model},
              {field::kArchitecture, run.pipeline.architecture},
              {field::kParameters, run.pipeline.parameters}}},
            {field::kLabels, run.labels}};
  j[field::kLabels][kForwardedRunIdLabel] = run.id;
  return to_line(j);
}

std::string encode_run_end(const Run& run) {
  json attachments = json::array();
  for (const Attachment& a : run.attachments) {
    if (a.type == "usage") continue;  // the parent's monitor attaches its own
    attachments.push_back({{field::kType, a.type}, {field::kName, a.name}, {field::kData, a.data}});
  }
  json errors = json::array();
  for (const MonitoringError& e : run.monitoring_errors) {
    errors.push_back(
        {{field::kSource, e.source}, {field::kMessage, e.message}, {field::kStep, e.step}});
  }
  json j = {{field::kEvent, event_name(EventType::kRunEnd)},
            {field::kAttachments, std::move(attachments)},
            {field::kNotes, run.notes},
            {field::kMonitoringErrors, std::move(errors)}};
  return to_line(j);
}

}  // namespace genscope::event_line
