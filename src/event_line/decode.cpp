// Reading event lines: strict parsing with named errors (decode.hpp).
#include "event_line/decode.hpp"

#include <cmath>
#include <string>
#include <nlohmann/json.hpp>

#include "genscope/error.hpp"
#include "genscope/run_json.hpp"

namespace genscope::event_line {

using nlohmann::json;

namespace {

[[noreturn]] void invalid(const std::string& what) { throw Error("InvalidEvent", what); }

// A field's name as error messages quote it.
std::string in_quotes(std::string_view key) { return "\"" + std::string(key) + "\""; }

const json* member(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::string get_string(const json& j, const char* key, bool required = false) {
  const json* v = member(j, key);
  if (v == nullptr) {
    if (required) invalid(in_quotes(key) + " is missing");
    return {};
  }
  if (v->is_string()) return v->get<std::string>();
  if (v->is_number_integer()) return std::to_string(v->get<std::int64_t>());
  invalid(in_quotes(key) + " must be a string");
}

std::optional<double> get_number(const json& j, const char* key) {
  const json* v = member(j, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) invalid(in_quotes(key) + " must be a number");
  const double d = v->get<double>();
  if (!std::isfinite(d)) invalid(in_quotes(key) + " must be finite");
  return d;
}

StepStatus get_status(const json& j, const char* key, StepStatus fallback) {
  const std::string s = get_string(j, key);
  if (s.empty()) return fallback;
  const auto st = parse_step_status(s);
  if (!st || *st == StepStatus::kRunning) {
    invalid(in_quotes(key) + " must be \"ok\", \"failed\" or \"skipped\", not \"" + s + "\"");
  }
  return *st;
}

std::map<std::string, std::string> get_string_map(const json& j, const char* key) {
  std::map<std::string, std::string> out;
  const json* v = member(j, key);
  if (v == nullptr) return out;
  if (!v->is_object()) invalid(in_quotes(key) + " must be an object");
  for (auto it = v->begin(); it != v->end(); ++it) {
    out[it.key()] = it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
  }
  return out;
}

std::optional<StepKind> kind_from(const json& j) {
  const std::string k = get_string(j, field::kKind);
  if (k.empty()) return StepKind::kCustom;
  const auto kind = parse_step_kind(k);
  if (!kind) invalid("unknown step kind \"" + k + "\"");
  return kind;
}

EventType type_from(const std::string& e) {
  const auto type = parse_event_type(e);
  if (!type) invalid("unknown event \"" + e + "\"");
  return *type;
}

}  // namespace

Event parse_event(std::string_view line) {
  if (line.size() > kMaxLineBytes) {
    invalid("line of " + std::to_string(line.size()) + " bytes is longer than the limit of " +
            std::to_string(kMaxLineBytes));
  }
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) invalid("not valid JSON");
  if (!j.is_object()) invalid("not a JSON object");
  Event e;
  e.type = type_from(get_string(j, field::kEvent, true));
  e.ref = get_string(j, field::kRef);
  switch (e.type) {
    case EventType::kBegin:
      e.name = get_string(j, field::kName, true);
      if (e.name.empty()) invalid(in_quotes(field::kName) + " is empty");
      e.kind = *kind_from(j);
      e.source = get_string(j, field::kSource);
      break;
    case EventType::kEnd: {
      e.name = get_string(j, field::kName);
      e.error = get_string(j, field::kError);
      e.error_type = get_string(j, field::kErrorType);
      e.status =
          get_status(j, field::kStatus, e.error.empty() ? StepStatus::kOk : StepStatus::kFailed);
      break;
    }
    case EventType::kIteration: {
      const auto n = get_number(j, field::kN);
      if (n) {
        if (*n < 1 || *n > 1e6 || std::floor(*n) != *n) {
          invalid(in_quotes(field::kN) + " must be a whole number from 1 to 1000000");
        }
        e.n = static_cast<std::int64_t>(*n);
      }
      e.duration_s = get_number(j, field::kDurationS);
      if (e.duration_s && *e.duration_s < 0) {
        invalid(in_quotes(field::kDurationS) + " must not be negative");
      }
      e.step = get_string(j, field::kStep);
      break;
    }
    case EventType::kCounter: {
      e.name = get_string(j, field::kName, true);
      if (e.name.empty()) invalid(in_quotes(field::kName) + " is empty");
      const auto v = get_number(j, field::kValue);
      if (!v) invalid(in_quotes(field::kValue) + " is missing");
      e.value = *v;
      e.step = get_string(j, field::kStep);
      break;
    }
    case EventType::kAttempt:
      e.strategy = get_string(j, field::kStrategy, true);
      e.outcome = get_status(j, field::kOutcome, StepStatus::kOk);
      e.error = get_string(j, field::kError);
      e.duration_s = get_number(j, field::kDurationS);
      if (e.duration_s && *e.duration_s < 0) {
        invalid(in_quotes(field::kDurationS) + " must not be negative");
      }
      e.step = get_string(j, field::kStep);
      break;
    case EventType::kLabel: {
      e.key = get_string(j, field::kKey, true);
      if (e.key.empty()) invalid(in_quotes(field::kKey) + " is empty");
      const json* v = member(j, field::kValue);
      if (v == nullptr) invalid(in_quotes(field::kValue) + " is missing");
      e.text = v->is_string() ? v->get<std::string>() : v->dump();
      const std::string scope = get_string(j, field::kScope);
      if (!scope.empty() && scope != kScopeRun && scope != kScopeStep) {
        invalid(in_quotes(field::kScope) + " must be " + in_quotes(kScopeRun) + " or " +
                in_quotes(kScopeStep));
      }
      e.run_scope = scope == kScopeRun;
      e.step = get_string(j, field::kStep);
      break;
    }
    case EventType::kRunBegin:
      e.name = get_string(j, field::kName);
      if (const json* p = member(j, field::kPipeline)) {
        if (!p->is_object()) invalid(in_quotes(field::kPipeline) + " must be an object");
        e.pipeline.name = get_string(*p, field::kName);
        e.pipeline.model = get_string(*p, field::kModel);
        e.pipeline.architecture = get_string(*p, field::kArchitecture);
        e.pipeline.parameters = get_string_map(*p, field::kParameters);
      }
      e.labels = get_string_map(j, field::kLabels);
      break;
    case EventType::kRunEnd:
      if (const json* a = member(j, field::kAttachments)) {
        if (!a->is_array()) invalid(in_quotes(field::kAttachments) + " must be an array");
        for (const json& x : *a) {
          if (!x.is_object()) invalid(in_quotes(field::kAttachments) + " must hold objects");
          Attachment att;
          att.type = get_string(x, field::kType);
          att.name = get_string(x, field::kName);
          if (const json* d = member(x, field::kData)) att.data = *d;
          e.attachments.push_back(std::move(att));
        }
      }
      if (const json* a = member(j, field::kNotes)) {
        if (!a->is_array()) invalid(in_quotes(field::kNotes) + " must be an array");
        for (const json& x : *a) {
          if (!x.is_string()) invalid(in_quotes(field::kNotes) + " must hold strings");
          e.notes.push_back(x.get<std::string>());
        }
      }
      if (const json* a = member(j, field::kMonitoringErrors)) {
        if (!a->is_array()) invalid(in_quotes(field::kMonitoringErrors) + " must be an array");
        for (const json& x : *a) {
          if (!x.is_object()) invalid(in_quotes(field::kMonitoringErrors) + " must hold objects");
          MonitoringError m;
          m.source = get_string(x, field::kSource);
          m.message = get_string(x, field::kMessage);
          m.step = get_string(x, field::kStep);
          e.errors.push_back(std::move(m));
        }
      }
      break;
    case EventType::kStep: {
      const json* s = member(j, field::kStep);
      if (s == nullptr || !s->is_object()) {
        invalid(in_quotes(field::kStep) + " must be a step object of a run document");
      }
      try {
        e.record = step_from_json(*s);
      } catch (const Error& err) {
        invalid(in_quotes(field::kStep) + ": " + err.what());
      }
      if (const json* t = member(j, field::kStartSteadyNs)) {
        if (!t->is_number_integer()) {
          invalid(in_quotes(field::kStartSteadyNs) + " must be an integer");
        }
        e.start_steady_ns = t->get<std::int64_t>();
      }
      if (e.record.duration_ns < 0) {
        invalid(in_quotes(std::string(field::kStep) + ".duration_ns") + " must not be negative");
      }
      break;
    }
  }
  return e;
}

}  // namespace genscope::event_line
