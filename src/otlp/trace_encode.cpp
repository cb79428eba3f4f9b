// A finished run as an OTLP ExportTraceServiceRequest (docs/opentelemetry.md, "Spans").
//
// Field numbers from the OTLP specification (opentelemetry-proto trace/v1, collector/trace/v1):
//   ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
//   ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; }
//   ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; }
//   Span { bytes trace_id = 1; bytes span_id = 2; bytes parent_span_id = 4; string name = 5;
//          SpanKind kind = 6; fixed64 start_time_unix_nano = 7; fixed64 end_time_unix_nano = 8;
//          repeated KeyValue attributes = 9; repeated Event events = 11;
//          uint32 dropped_events_count = 12; Status status = 15; fixed32 flags = 16; }
//   Span.Event { fixed64 time_unix_nano = 1; string name = 2; repeated KeyValue attributes = 3; }
//   Status { string message = 2; StatusCode code = 3; }  (UNSET 0, OK 1, ERROR 2)
#include <algorithm>
#include <string>

#include "genscope/otlp.hpp"
#include "otlp/otlp_common.hpp"

namespace genscope {
namespace detail::otlp {
namespace {

constexpr std::uint32_t kRequestResourceSpans = 1;
constexpr std::uint32_t kResourceSpansResource = 1, kResourceSpansScopeSpans = 2;
constexpr std::uint32_t kScopeSpansScope = 1, kScopeSpansSpans = 2;
constexpr std::uint32_t kSpanTraceId = 1, kSpanSpanId = 2, kSpanParentSpanId = 4, kSpanName = 5,
                        kSpanKind = 6, kSpanStart = 7, kSpanEnd = 8, kSpanAttributes = 9,
                        kSpanEvents = 11, kSpanDroppedEvents = 12, kSpanStatus = 15,
                        kSpanFlags = 16;
constexpr std::uint32_t kEventTime = 1, kEventName = 2, kEventAttributes = 3;
constexpr std::uint32_t kStatusMessage = 2, kStatusCode = 3;
constexpr std::uint64_t kSpanKindInternal = 1;
constexpr std::uint64_t kStatusError = 2;
constexpr std::uint32_t kFlagsSampled = 1;  // W3C trace flags: sampled

/// Span events kept per span (iterations, attempts, errors); the rest are counted as dropped.
constexpr std::size_t kMaxEvents = 1000;
/// Tensor attachments summarised per step.
constexpr std::size_t kMaxTensors = 32;

constexpr std::uint32_t A = kSpanAttributes;

void metric_attributes(ProtobufWriter& s, const MetricFigures& m) {
  const std::string p = "genscope.metric." + m.name;
  attribute_double(s, A, p + ".before", m.before);
  attribute_double(s, A, p + ".peak", m.peak);
  attribute_double(s, A, p + ".after", m.after);
  if (m.peak_offset_ns >= 0) attribute_int(s, A, p + ".peak_offset_ns", m.peak_offset_ns);
  if (!m.peak_source.empty()) attribute(s, A, p + ".peak_source", m.peak_source);
  attribute(s, A, p + ".unit", to_string(m.unit));
}

std::string shape_text(const nlohmann::json& shape) {
  std::string out;
  for (const nlohmann::json& d : shape) {
    if (!out.empty()) out += "x";
    out += d.is_number_integer() ? std::to_string(d.get<std::int64_t>()) : "?";
  }
  return out;
}

double number_at(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return kNaN;
  const auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<double>() : kNaN;
}

// A tensor attachment (docs/tensors.md) as a few attributes: shape, dtype, device, non-finite
// counts, moments and the checks that failed.
void tensor_attributes(ProtobufWriter& s, const Attachment& a) {
  const nlohmann::json& d = a.data;
  if (!d.is_object()) return;
  const std::string p = "genscope.tensor." + a.name;
  if (auto it = d.find("shape"); it != d.end() && it->is_array())
    attribute(s, A, p + ".shape", shape_text(*it));
  for (const char* key : {"dtype", "device", "role"}) {
    if (auto it = d.find(key); it != d.end() && it->is_string()) {
      attribute(s, A, p + "." + key, it->get<std::string>());
    }
  }
  if (auto it = d.find("stats"); it != d.end() && it->is_object()) {
    for (const char* key :
         {"min", "max", "mean", "std", "nan_count", "pos_inf_count", "neg_inf_count"}) {
      attribute_double(s, A, p + "." + key, number_at(*it, key));
    }
  }
  if (auto it = d.find("checks"); it != d.end() && it->is_array()) {
    std::string failed;
    for (const nlohmann::json& c : *it) {
      if (!c.is_object()) continue;
      const auto passed = c.find("passed");
      if (passed == c.end() || !passed->is_boolean() || passed->get<bool>()) continue;
      const auto name = c.find("name");
      if (!failed.empty()) failed += ",";
      failed += name != c.end() && name->is_string() ? name->get<std::string>() : std::string("?");
    }
    if (!failed.empty()) attribute(s, A, p + ".checks_failed", failed);
  }
}

void step_attributes(ProtobufWriter& s, const StepRecord& step) {
  attribute_int(s, A, "genscope.step.id", step.id);
  attribute(s, A, "genscope.step.kind", to_string(step.kind));
  attribute(s, A, "genscope.step.status", to_string(step.status));
  attribute_int(s, A, "genscope.step.thread", step.thread);
  attribute_int(s, A, "genscope.step.duration_ns", step.duration_ns);
  if (!step.source.empty()) attribute(s, A, "code.location", step.source);
  if (!step.closed_by.empty()) attribute(s, A, "genscope.step.closed_by", step.closed_by);
  if (step.inferred) attribute_bool(s, A, "genscope.step.inferred", true);
  if (!step.error_type.empty()) attribute(s, A, "error.type", step.error_type);
  if (!step.error_message.empty()) attribute(s, A, "genscope.step.error", step.error_message);
  for (const MetricFigures& m : step.metrics) metric_attributes(s, m);
  for (const auto& [name, value] : step.counters)
    attribute_double(s, A, "genscope.counter." + name, value);
  for (const auto& [key, value] : step.labels) attribute(s, A, "genscope.step.label." + key, value);
  if (!step.iteration_ns.empty()) {
    const IterationStats it = summarize_iterations(step.iteration_ns);
    attribute_int(s, A, "genscope.iterations.count", static_cast<std::int64_t>(it.count));
    attribute_double(s, A, "genscope.iterations.total_ns", it.total_ns);
    attribute_double(s, A, "genscope.iterations.first_ns", it.first_ns);
    attribute_double(s, A, "genscope.iterations.mean_ns", it.mean_ns);
    attribute_double(s, A, "genscope.iterations.p50_ns", it.p50_ns);
    attribute_double(s, A, "genscope.iterations.p95_ns", it.p95_ns);
    attribute_double(s, A, "genscope.iterations.per_second", it.iterations_per_second);
    if (step.iterations_inferred) attribute_bool(s, A, "genscope.iterations.inferred", true);
  }
  if (!step.attempts.empty()) {
    attribute_int(s, A, "genscope.attempts.count", static_cast<std::int64_t>(step.attempts.size()));
  }
  std::size_t tensors = 0;
  for (const Attachment& a : step.attachments) {
    if (a.type == "tensor" && tensors < kMaxTensors) {
      ++tensors;
      tensor_attributes(s, a);
    }
  }
  if (!step.attachments.empty()) {
    attribute_int(s, A, "genscope.attachments.count",
                  static_cast<std::int64_t>(step.attachments.size()));
  }
}

// Iterations (one event each, at the step start plus the durations so far: when the
// iteration ended if they ran back to back from the step start) and attempts.
void step_events(ProtobufWriter& s, const StepRecord& step, std::uint64_t start,
                 std::uint64_t end) {
  std::size_t written = 0;
  std::size_t dropped = 0;
  std::uint64_t t = start;
  for (std::size_t i = 0; i < step.iteration_ns.size(); ++i) {
    t += static_cast<std::uint64_t>(std::max<std::int64_t>(step.iteration_ns[i], 0));
    if (written >= kMaxEvents) {
      ++dropped;
      continue;
    }
    ++written;
    s.message(kSpanEvents, [&](ProtobufWriter& e) {
      e.fixed64(kEventTime, std::min(t, end));
      e.bytes(kEventName, "iteration");
      attribute_int(e, kEventAttributes, "genscope.iteration.index", static_cast<std::int64_t>(i));
      attribute_int(e, kEventAttributes, "genscope.iteration.duration_ns", step.iteration_ns[i]);
    });
  }
  std::uint64_t at = start;
  for (const Attempt& a : step.attempts) {
    at += static_cast<std::uint64_t>(std::max<std::int64_t>(a.duration_ns, 0));
    if (written >= kMaxEvents) {
      ++dropped;
      continue;
    }
    ++written;
    s.message(kSpanEvents, [&](ProtobufWriter& e) {
      e.fixed64(kEventTime, std::min(at, end));
      e.bytes(kEventName, "attempt");
      attribute(e, kEventAttributes, "genscope.attempt.strategy", a.strategy);
      attribute(e, kEventAttributes, "genscope.attempt.outcome", to_string(a.outcome));
      if (!a.error.empty()) attribute(e, kEventAttributes, "genscope.attempt.error", a.error);
      attribute_int(e, kEventAttributes, "genscope.attempt.duration_ns", a.duration_ns);
    });
  }
  if (dropped > 0) s.varint(kSpanDroppedEvents, dropped);
}

void common_span_fields(ProtobufWriter& s, const std::string& trace, const std::string& id,
                        const std::string* parent, std::string_view name, std::uint64_t start,
                        std::uint64_t end) {
  s.bytes(kSpanTraceId, trace);
  s.bytes(kSpanSpanId, id);
  if (parent != nullptr) s.bytes(kSpanParentSpanId, *parent);
  string_field(s, kSpanName, name);
  s.varint(kSpanKind, kSpanKindInternal);
  s.fixed64(kSpanStart, start);
  s.fixed64(kSpanEnd, std::max(start, end));
}

void step_span(ProtobufWriter& w, const Run& run, const StepRecord& step, const std::string& trace,
               const std::string& root, bool parent_known) {
  const std::uint64_t start = run_start_ns(run) + static_cast<std::uint64_t>(std::max<std::int64_t>(
                                                      step.start_offset_ns, 0));
  const std::uint64_t end =
      start + static_cast<std::uint64_t>(std::max<std::int64_t>(step.duration_ns, 0));
  const std::string id = span_id(run, step.id);
  const std::string parent = parent_known ? span_id(run, step.parent_id) : root;
  w.message(kScopeSpansSpans, [&](ProtobufWriter& s) {
    common_span_fields(s, trace, id, &parent, step.name, start, end);
    step_attributes(s, step);
    step_events(s, step, start, end);
    if (step.status == StepStatus::kFailed) {
      s.message(kSpanStatus, [&](ProtobufWriter& st) {
        const std::string message = step.error_type.empty() || step.error_message.empty()
                                        ? step.error_type + step.error_message
                                        : step.error_type + ": " + step.error_message;
        if (!message.empty()) string_field(st, kStatusMessage, message);
        st.varint(kStatusCode, kStatusError);
      });
    }
    s.fixed32(kSpanFlags, kFlagsSampled);
  });
}

void root_span(ProtobufWriter& w, const Run& run, const std::string& trace,
               const std::string& root) {
  w.message(kScopeSpansSpans, [&](ProtobufWriter& s) {
    const std::string name =
        run.pipeline.name.empty() ? std::string("genscope run") : run.pipeline.name;
    common_span_fields(s, trace, root, nullptr, name, run_start_ns(run), run_end_ns(run));
    attribute(s, A, "genscope.run.id", run.id);
    attribute_int(s, A, "genscope.run.duration_ns", run.duration_ns);
    attribute_int(s, A, "genscope.run.steps", static_cast<std::int64_t>(run.steps.size()));
    std::int64_t failed = 0;
    for (const StepRecord& step : run.steps) failed += step.status == StepStatus::kFailed;
    attribute_int(s, A, "genscope.run.steps_failed", failed);
    attribute_int(s, A, "genscope.run.monitoring_errors",
                  static_cast<std::int64_t>(run.monitoring_errors.size()));
    for (const std::string& metric : run.series.metrics) {
      attribute_double(s, A, "genscope.run.peak." + metric, run.peak(metric));
    }
    std::size_t written = 0;
    for (const MonitoringError& e : run.monitoring_errors) {
      if (written++ >= kMaxEvents) break;
      s.message(kSpanEvents, [&](ProtobufWriter& ev) {
        ev.fixed64(kEventTime, run_start_ns(run) + static_cast<std::uint64_t>(
                                                       std::max<std::int64_t>(e.offset_ns, 0)));
        ev.bytes(kEventName, "monitoring_error");
        attribute(ev, kEventAttributes, "genscope.error.source", e.source);
        attribute(ev, kEventAttributes, "genscope.error.message", e.message);
        if (!e.step.empty()) attribute(ev, kEventAttributes, "genscope.error.step", e.step);
      });
    }
    if (run.monitoring_errors.size() > kMaxEvents) {
      s.varint(kSpanDroppedEvents, run.monitoring_errors.size() - kMaxEvents);
    }
    if (failed > 0) {
      s.message(kSpanStatus, [&](ProtobufWriter& st) {
        string_field(st, kStatusMessage, std::to_string(failed) + " step(s) failed");
        st.varint(kStatusCode, kStatusError);
      });
    }
    s.fixed32(kSpanFlags, kFlagsSampled);
  });
}

}  // namespace
}  // namespace detail::otlp

std::string encode_otlp_traces(const Run& run, std::string_view service_name) {
  using namespace detail::otlp;
  const std::string trace = trace_id(run);
  const std::string root = span_id(run, -1);
  std::vector<char> known;  // step ids present, so a dangling parent id becomes the root
  for (const StepRecord& step : run.steps) {
    if (step.id >= 0 && static_cast<std::size_t>(step.id) < (1u << 24)) {
      if (known.size() <= static_cast<std::size_t>(step.id)) known.resize(step.id + 1, 0);
      known[step.id] = 1;
    }
  }
  auto is_known = [&](int id) {
    return id >= 0 && static_cast<std::size_t>(id) < known.size() && known[id] != 0;
  };
  detail::ProtobufWriter w;
  w.message(kRequestResourceSpans, [&](detail::ProtobufWriter& rs) {
    resource(rs, kResourceSpansResource, run, service_name);
    rs.message(kResourceSpansScopeSpans, [&](detail::ProtobufWriter& ss) {
      scope(ss, kScopeSpansScope, run);
      root_span(ss, run, trace, root);
      for (const StepRecord& step : run.steps) {
        step_span(ss, run, step, trace, root,
                  step.parent_id != step.id && is_known(step.parent_id));
      }
    });
  });
  return w.take();
}

std::string otlp_trace_id_hex(const Run& run) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : detail::otlp::trace_id(run)) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

std::string otlp_span_id_hex(const Run& run, int step_id) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : detail::otlp::span_id(run, step_id)) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

}  // namespace genscope
