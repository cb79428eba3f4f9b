// Event-channel events -> steps and runs.
#include "watch/event_applier.hpp"

#include <vector>

#include "watch/progress_iterations.hpp"
#include "watch/text_scan.hpp"

namespace genscope::watch {

int EventApplier::target(const Event& e) const {
  if (!e.ref.empty()) return applier_.find_ref(e.ref);
  if (!e.step.empty()) {
    if (int t = applier_.find(Origin::kEvents, e.step)) return t;
    return applier_.find(Origin::kForwarded, e.step);
  }
  if (int t = applier_.innermost(Origin::kEvents)) return t;
  return applier_.innermost(Origin::kForwarded);
}

void EventApplier::apply(const Event& e, std::int64_t ts) {
  const Origin origin = e.ref.empty() ? Origin::kEvents : Origin::kForwarded;
  switch (e.type) {
    case EventType::kBegin: {
      OpenOptions o;
      o.source = e.source.empty() ? std::string("events") : e.source;
      const int token = applier_.open(origin, e.kind, e.name, ts, o);
      if (token != 0 && !e.ref.empty()) applier_.set_ref(token, e.ref);
      return;
    }
    case EventType::kEnd: {
      int token = 0;
      if (!e.ref.empty()) {
        token = applier_.find_ref(e.ref);
      } else if (!e.name.empty()) {
        token = applier_.find(Origin::kEvents, e.name);
      } else {
        token = applier_.innermost(Origin::kEvents);
      }
      if (token == 0) {
        applier_.monitoring_error("events", "\"end\" for no open step" +
                                                (e.name.empty() ? std::string() : " named \"" + e.name + "\""));
        return;
      }
      if (e.status == StepStatus::kFailed) {
        applier_.fail(token, e.error.empty() ? std::string_view("failed") : std::string_view(e.error),
                      e.error_type);
      } else if (e.status == StepStatus::kSkipped) {
        applier_.skip(token, e.error);
      }
      last_attempt_ns_.erase(token);
      applier_.end(origin, token, ts);
      return;
    }
    case EventType::kIteration: {
      const int token = target(e);
      if (token == 0) {
        applier_.monitoring_error("events", "\"iteration\" with no open step");
        return;
      }
      const std::int64_t total =
          e.duration_s ? seconds_to_ns(*e.duration_s) : ts - applier_.last_mark(token);
      std::vector<std::int64_t> d;
      spread_evenly(total, e.n, d);
      applier_.iterations(origin, token, d, e.n > 1);
      applier_.set_last_mark(token, ts);
      return;
    }
    case EventType::kCounter: {
      const int token = target(e);
      if (token == 0) {
        applier_.monitoring_error("events", "\"counter\" with no open step");
        return;
      }
      applier_.counter(token, e.name, e.value);
      return;
    }
    case EventType::kAttempt: {
      const int token = target(e);
      if (token == 0) {
        applier_.monitoring_error("events", "\"attempt\" with no open step");
        return;
      }
      auto it = last_attempt_ns_.find(token);
      const std::int64_t since = it != last_attempt_ns_.end() ? it->second : applier_.opened_at(token);
      Attempt a;
      a.strategy = e.strategy;
      a.outcome = e.outcome;
      a.error = e.error;
      a.duration_ns = e.duration_s ? seconds_to_ns(*e.duration_s) : std::max<std::int64_t>(0, ts - since);
      applier_.attempt(token, std::move(a));
      last_attempt_ns_[token] = ts;
      return;
    }
    case EventType::kLabel: {
      const int token = e.run_scope ? 0 : target(e);
      if (token == 0) {
        applier_.run_label(e.key, e.text);
      } else {
        applier_.label(token, e.key, e.text);
      }
      return;
    }
    case EventType::kRunBegin: {
      RunAnnouncement a;
      a.name = e.name;
      a.announced_by = e.labels.count(event_line::kForwardedRunIdLabel) != 0 ? "forwarded" : "events";
      a.pipeline = e.pipeline;
      a.labels = e.labels;
      applier_.run_begin(std::move(a), ts);
      return;
    }
    case EventType::kRunEnd:
      for (const Attachment& a : e.attachments) applier_.run_attach(a);
      for (const std::string& n : e.notes) applier_.run_note("in-process: " + n);
      for (const MonitoringError& m : e.errors) {
        applier_.monitoring_error("inprocess." + m.source, m.message);
      }
      applier_.run_end(ts);
      return;
    case EventType::kStep: {
      const int token = applier_.find_ref(e.ref);
      if (token != 0) {
        applier_.merge_and_end(token, e.record, ts);
        return;
      }
      StepRecord r = e.record;
      r.metrics = applier_.forwarded_metrics(e.record);
      r.labels["inprocess.duration_ns"] = std::to_string(e.record.duration_ns);
      const std::int64_t start = e.start_steady_ns.value_or(ts - e.record.duration_ns);
      applier_.add_finished(Origin::kForwarded, std::move(r), start);
      return;
    }
  }
}

}  // namespace genscope::watch
