// Event-channel lines: strict parsing (named errors) and the forwarder's encoding.
#include "watch/event_codec.hpp"

#include <cmath>
#include <nlohmann/json.hpp>

#include "genscope/error.hpp"
#include "genscope/run_json.hpp"

namespace genscope::watch {

using nlohmann::json;

namespace {

[[noreturn]] void invalid(const std::string& what) { throw Error("InvalidEvent", what); }

const json* member(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::string get_string(const json& j, const char* key, bool required = false) {
  const json* v = member(j, key);
  if (v == nullptr) {
    if (required) invalid(std::string("\"") + key + "\" is missing");
    return {};
  }
  if (v->is_string()) return v->get<std::string>();
  if (v->is_number_integer()) return std::to_string(v->get<std::int64_t>());
  invalid(std::string("\"") + key + "\" must be a string");
}

std::optional<double> get_number(const json& j, const char* key) {
  const json* v = member(j, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) invalid(std::string("\"") + key + "\" must be a number");
  const double d = v->get<double>();
  if (!std::isfinite(d)) invalid(std::string("\"") + key + "\" must be finite");
  return d;
}

StepStatus get_status(const json& j, const char* key, StepStatus fallback) {
  const std::string s = get_string(j, key);
  if (s.empty()) return fallback;
  const auto st = parse_step_status(s);
  if (!st || *st == StepStatus::kRunning) {
    invalid(std::string("\"") + key + "\" must be \"ok\", \"failed\" or \"skipped\", not \"" + s + "\"");
  }
  return *st;
}

std::map<std::string, std::string> get_string_map(const json& j, const char* key) {
  std::map<std::string, std::string> out;
  const json* v = member(j, key);
  if (v == nullptr) return out;
  if (!v->is_object()) invalid(std::string("\"") + key + "\" must be an object");
  for (auto it = v->begin(); it != v->end(); ++it) {
    out[it.key()] = it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
  }
  return out;
}

std::optional<StepKind> kind_from(const json& j) {
  const std::string k = get_string(j, "kind");
  if (k.empty()) return StepKind::kCustom;
  const auto kind = parse_step_kind(k);
  if (!kind) invalid("unknown step kind \"" + k + "\"");
  return kind;
}

EventType type_from(const std::string& e) {
  if (e == "begin") return EventType::kBegin;
  if (e == "end") return EventType::kEnd;
  if (e == "iteration") return EventType::kIteration;
  if (e == "counter") return EventType::kCounter;
  if (e == "attempt") return EventType::kAttempt;
  if (e == "label") return EventType::kLabel;
  if (e == "run_begin") return EventType::kRunBegin;
  if (e == "run_end") return EventType::kRunEnd;
  if (e == "step") return EventType::kStep;
  invalid("unknown event \"" + e + "\"");
}

}  // namespace

Event parse_event(std::string_view line) {
  if (line.size() > kMaxEventLineBytes) {
    invalid("line of " + std::to_string(line.size()) + " bytes is longer than the limit of " +
            std::to_string(kMaxEventLineBytes));
  }
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) invalid("not valid JSON");
  if (!j.is_object()) invalid("not a JSON object");
  Event e;
  e.type = type_from(get_string(j, "event", true));
  e.ref = get_string(j, "ref");
  switch (e.type) {
    case EventType::kBegin:
      e.name = get_string(j, "name", true);
      if (e.name.empty()) invalid("\"name\" is empty");
      e.kind = *kind_from(j);
      e.source = get_string(j, "source");
      break;
    case EventType::kEnd: {
      e.name = get_string(j, "name");
      e.error = get_string(j, "error");
      e.error_type = get_string(j, "error_type");
      e.status = get_status(j, "status", e.error.empty() ? StepStatus::kOk : StepStatus::kFailed);
      break;
    }
    case EventType::kIteration: {
      const auto n = get_number(j, "n");
      if (n) {
        if (*n < 1 || *n > 1e6 || std::floor(*n) != *n) invalid("\"n\" must be a whole number from 1 to 1000000");
        e.n = static_cast<std::int64_t>(*n);
      }
      e.duration_s = get_number(j, "duration_s");
      if (e.duration_s && *e.duration_s < 0) invalid("\"duration_s\" must not be negative");
      e.step = get_string(j, "step");
      break;
    }
    case EventType::kCounter: {
      e.name = get_string(j, "name", true);
      if (e.name.empty()) invalid("\"name\" is empty");
      const auto v = get_number(j, "value");
      if (!v) invalid("\"value\" is missing");
      e.value = *v;
      e.step = get_string(j, "step");
      break;
    }
    case EventType::kAttempt:
      e.strategy = get_string(j, "strategy", true);
      e.outcome = get_status(j, "outcome", StepStatus::kOk);
      e.error = get_string(j, "error");
      e.duration_s = get_number(j, "duration_s");
      if (e.duration_s && *e.duration_s < 0) invalid("\"duration_s\" must not be negative");
      e.step = get_string(j, "step");
      break;
    case EventType::kLabel: {
      e.key = get_string(j, "key", true);
      if (e.key.empty()) invalid("\"key\" is empty");
      const json* v = member(j, "value");
      if (v == nullptr) invalid("\"value\" is missing");
      e.text = v->is_string() ? v->get<std::string>() : v->dump();
      const std::string scope = get_string(j, "scope");
      if (!scope.empty() && scope != "run" && scope != "step") invalid("\"scope\" must be \"run\" or \"step\"");
      e.run_scope = scope == "run";
      e.step = get_string(j, "step");
      break;
    }
    case EventType::kRunBegin:
      e.name = get_string(j, "name");
      if (const json* p = member(j, "pipeline")) {
        if (!p->is_object()) invalid("\"pipeline\" must be an object");
        e.pipeline.name = get_string(*p, "name");
        e.pipeline.model = get_string(*p, "model");
        e.pipeline.architecture = get_string(*p, "architecture");
        e.pipeline.parameters = get_string_map(*p, "parameters");
      }
      e.labels = get_string_map(j, "labels");
      break;
    case EventType::kRunEnd:
      if (const json* a = member(j, "attachments")) {
        if (!a->is_array()) invalid("\"attachments\" must be an array");
        for (const json& x : *a) {
          if (!x.is_object()) invalid("\"attachments\" must hold objects");
          Attachment att;
          att.type = get_string(x, "type");
          att.name = get_string(x, "name");
          if (const json* d = member(x, "data")) att.data = *d;
          e.attachments.push_back(std::move(att));
        }
      }
      if (const json* a = member(j, "notes")) {
        if (!a->is_array()) invalid("\"notes\" must be an array");
        for (const json& x : *a) {
          if (!x.is_string()) invalid("\"notes\" must hold strings");
          e.notes.push_back(x.get<std::string>());
        }
      }
      if (const json* a = member(j, "monitoring_errors")) {
        if (!a->is_array()) invalid("\"monitoring_errors\" must be an array");
        for (const json& x : *a) {
          if (!x.is_object()) invalid("\"monitoring_errors\" must hold objects");
          MonitoringError m;
          m.source = get_string(x, "source");
          m.message = get_string(x, "message");
          m.step = get_string(x, "step");
          e.errors.push_back(std::move(m));
        }
      }
      break;
    case EventType::kStep: {
      const json* s = member(j, "step");
      if (s == nullptr || !s->is_object()) invalid("\"step\" must be a step object of a run document");
      try {
        e.record = step_from_json(*s);
      } catch (const Error& err) {
        invalid(std::string("\"step\": ") + err.what());
      }
      if (const json* t = member(j, "start_steady_ns")) {
        if (!t->is_number_integer()) invalid("\"start_steady_ns\" must be an integer");
        e.start_steady_ns = t->get<std::int64_t>();
      }
      if (e.record.duration_ns < 0) invalid("\"step.duration_ns\" must not be negative");
      break;
    }
  }
  return e;
}

std::string encode_begin(const StepRecord& step, std::string_view ref) {
  json j = {{"event", "begin"},
            {"kind", std::string(to_string(step.kind))},
            {"name", step.name},
            {"ref", std::string(ref)}};
  if (!step.source.empty()) j["source"] = step.source;
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string encode_step(const StepRecord& step, std::string_view ref, std::int64_t start_steady_ns) {
  json j = {{"event", "step"},
            {"ref", std::string(ref)},
            {"start_steady_ns", start_steady_ns},
            {"step", to_json(step)}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string encode_run_begin(const Run& run) {
  json j = {{"event", "run_begin"},
            {"name", run.pipeline.name},
            {"pipeline",
             {{"name", run.pipeline.name},
              {"model", run.pipeline.model},
              {"architecture", run.pipeline.architecture},
              {"parameters", run.pipeline.parameters}}},
            {"labels", run.labels}};
  j["labels"]["inprocess.run_id"] = run.id;
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string encode_run_end(const Run& run) {
  json attachments = json::array();
  for (const Attachment& a : run.attachments) {
    if (a.type == "usage") continue;  // the parent's monitor attaches its own
    attachments.push_back({{"type", a.type}, {"name", a.name}, {"data", a.data}});
  }
  json errors = json::array();
  for (const MonitoringError& e : run.monitoring_errors) {
    errors.push_back({{"source", e.source}, {"message", e.message}, {"step", e.step}});
  }
  json j = {{"event", "run_end"},
            {"attachments", std::move(attachments)},
            {"notes", run.notes},
            {"monitoring_errors", std::move(errors)}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace genscope::watch
