// Tests of the event channel: the line format of src/event_line/ (every event, every malformed
// form with its named error, the limit, the encoder's lines read back), how events become
// steps and runs, the three run scopes, and the merging of a
// forwarded in-process step with the step the output gave for the same phase.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "event_line/decode.hpp"
#include "event_line/encode.hpp"
#include "genscope/error.hpp"
#include "watch_test_util.hpp"

namespace genscope {
namespace {

using testing::Harness;
using event_line::Event;
using event_line::EventType;
using event_line::parse_event;

std::string error_of(std::string_view line) {
  try {
    parse_event(line);
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "InvalidEvent");
    return e.what();
  }
  return "no error";
}

TEST(EventCodec, ParsesEveryEvent) {
  Event e = parse_event(R"({"event":"begin","kind":"sampling","name":"denoise","source":"gen.py:12"})");
  EXPECT_EQ(e.type, EventType::kBegin);
  EXPECT_EQ(e.kind, StepKind::kSampling);
  EXPECT_EQ(e.name, "denoise");
  EXPECT_EQ(e.source, "gen.py:12");
  e = parse_event(R"({"event":"begin","name":"x"})");
  EXPECT_EQ(e.kind, StepKind::kCustom);
  e = parse_event(R"({"event":"end","error":"boom"})");
  EXPECT_EQ(e.status, StepStatus::kFailed);
  e = parse_event(R"({"event":"end","status":"skipped","error":"cached"})");
  EXPECT_EQ(e.status, StepStatus::kSkipped);
  e = parse_event(R"({"event":"iteration","n":4,"duration_s":0.5})");
  EXPECT_EQ(e.n, 4);
  EXPECT_EQ(e.duration_s, 0.5);
  e = parse_event(R"({"event":"counter","name":"frames","value":16})");
  EXPECT_EQ(e.value, 16);
  e = parse_event(R"({"event":"attempt","strategy":"tiled","outcome":"failed","error":"oom","duration_s":1})");
  EXPECT_EQ(e.outcome, StepStatus::kFailed);
  e = parse_event(R"({"event":"label","key":"seed","value":42,"scope":"run"})");
  EXPECT_EQ(e.text, "42");
  EXPECT_TRUE(e.run_scope);
  e = parse_event(R"({"event":"run_begin","name":"job 1","pipeline":{"name":"t2i","parameters":{"steps":"20"}},"labels":{"user":"a"}})");
  EXPECT_EQ(e.pipeline.name, "t2i");
  EXPECT_EQ(e.pipeline.parameters.at("steps"), "20");
  EXPECT_EQ(e.labels.at("user"), "a");
  e = parse_event(R"({"event":"run_end","notes":["n"],"attachments":[{"type":"text","name":"t","data":{"a":1}}],"monitoring_errors":[{"source":"nvml","message":"m"}]})");
  EXPECT_EQ(e.attachments.size(), 1u);
  EXPECT_EQ(e.errors.at(0).source, "nvml");
  e = parse_event(R"({"event":"step","ref":"7:1:3","start_steady_ns":123,"step":{"id":3,"name":"vae","kind":"vae_decode","status":"ok","duration_ns":5,"iterations":{"durations_ns":[1,2],"inferred":true}}})");
  EXPECT_EQ(e.record.name, "vae");
  EXPECT_EQ(e.record.iteration_ns.size(), 2u);
  EXPECT_TRUE(e.record.iterations_inferred);
  EXPECT_EQ(e.start_steady_ns, 123);
  e = parse_event("{\"event\":\"end\"}\r");  // CRLF writers
  EXPECT_EQ(e.type, EventType::kEnd);
}

TEST(EventCodec, MalformedLinesGiveNamedErrors) {
  EXPECT_NE(error_of(""), "no error");
  EXPECT_NE(error_of("{\"event\":\"begin\",\"kind\":").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("[1,2]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(error_of("{}").find("\"event\" is missing"), std::string::npos);
  EXPECT_NE(error_of(R"({"event":"explode"})").find("unknown event"), std::string::npos);
  EXPECT_NE(error_of(R"({"event":"begin"})").find("\"name\" is missing"), std::string::npos);
  EXPECT_NE(error_of(R"({"event":"begin","name":""})").find("empty"), std::string::npos);
  EXPECT_NE(error_of(R"({"event":"begin","name":"x","kind":"warp"})").find("unknown step kind"), std::string::npos);
  EXPECT_NE(error_of(R"({"event":"begin","name":["x"]})").find("must be a string"), std::string::npos);
  EXPECT_NE(error_of(R"({"event":"end","status":"running"})").find("\"status\""), std::string::npos);
  EXPECT_NE(error_of(R"({"event":"iteration","n":0})").find("\"n\""), std::string::npos);
  EXPECT_NE(error_of(R"({"event":"iteration","n":1.5})").find("\"n\""), std::string::npos);
  EXPECT_NE(error_of(R"({"event":"iteration","duration_s":-1})").find("negative"), std::string::npos);
  EXPECT_NE(error_of(R"({"event":"iteration","duration_s":"1"})").find("must be a number"), std::string::npos);
  EXPECT_NE(error_of(R"({"event":"counter","name":"x"})").find("\"value\" is missing"), std::string::npos);
  EXPECT_NE(error_of(R"({"event":"label","key":"k"})").find("\"value\" is missing"), std::string::npos);
  EXPECT_NE(error_of(R"({"event":"label","key":"k","value":"v","scope":"galaxy"})").find("\"scope\""), std::string::npos);
  EXPECT_NE(error_of(R"({"event":"run_begin","pipeline":"t2i"})").find("\"pipeline\""), std::string::npos);
  EXPECT_NE(error_of(R"({"event":"step","step":3})").find("step object"), std::string::npos);
  EXPECT_NE(error_of(R"({"event":"step","step":{"kind":"nope"}})").find("unknown step kind"), std::string::npos);
  EXPECT_NE(error_of(R"({"event":"step","step":{"kind":"custom","status":"ok","duration_ns":-5}})").find("negative"), std::string::npos);
  EXPECT_NE(error_of(R"({"event":"run_end","attachments":{}})").find("\"attachments\""), std::string::npos);
}

TEST(EventCodec, LineLimit) {
  const std::string too_long(event_line::kMaxLineBytes + 1, ' ');
  EXPECT_NE(error_of(too_long).find("longer than the limit of 16777216"), std::string::npos);
  // At the limit the line is read (here: blanks, so not JSON, but not too long either).
  const std::string at_limit(event_line::kMaxLineBytes, ' ');
  EXPECT_EQ(error_of(at_limit).find("longer than"), std::string::npos);
}

TEST(EventCodec, EventNamesBothWays) {
  for (EventType t : {EventType::kBegin, EventType::kEnd, EventType::kIteration, EventType::kCounter,
                      EventType::kAttempt, EventType::kLabel, EventType::kRunBegin, EventType::kRunEnd,
                      EventType::kStep}) {
    EXPECT_EQ(event_line::parse_event_type(event_line::to_string(t)), t) << event_line::to_string(t);
  }
  EXPECT_EQ(event_line::to_string(EventType::kRunBegin), "run_begin");
  EXPECT_FALSE(event_line::parse_event_type("Begin").has_value());
}

// What the in-process sink writes is what the watch engine reads.
TEST(EventCodec, EncodedLinesParseBack) {
  StepRecord step;
  step.id = 3;
  step.name = "vae \xff decode";  // not UTF-8: written with U+FFFD, the line stays valid
  step.kind = StepKind::kVaeDecode;
  step.source = "gen.py:40";
  step.status = StepStatus::kOk;
  step.duration_ns = 5000;
  const std::string ref = event_line::forwarded_ref(42, 1, 2, 3);
  EXPECT_EQ(ref, "42.1:2:3");

  const std::string begin = event_line::encode_begin(step, ref);
  EXPECT_EQ(begin.find('\n'), std::string::npos);
  Event e = parse_event(begin);
  EXPECT_EQ(e.type, EventType::kBegin);
  EXPECT_EQ(e.kind, StepKind::kVaeDecode);
  EXPECT_EQ(e.name, "vae \xef\xbf\xbd decode");
  EXPECT_EQ(e.ref, ref);
  EXPECT_EQ(e.source, "gen.py:40");

  e = parse_event(event_line::encode_step(step, ref, 123));
  EXPECT_EQ(e.type, EventType::kStep);
  EXPECT_EQ(e.ref, ref);
  EXPECT_EQ(e.start_steady_ns, 123);
  EXPECT_EQ(e.record.kind, StepKind::kVaeDecode);
  EXPECT_EQ(e.record.duration_ns, 5000);

  genscope::Run run;  // (qualified: inside a TEST, Run is testing::Test::Run)
  run.id = "ab12";
  run.pipeline.name = "t2i";
  run.pipeline.model = "sd15";
  run.pipeline.parameters["steps"] = "20";
  run.labels["user"] = "a";
  run.notes.push_back("a note");
  run.attachments.push_back({"text", "t", nlohmann::json{{"a", 1}}});
  run.attachments.push_back({"usage", "usage", nlohmann::json::object()});  // the parent's own
  run.monitoring_errors.push_back({.source = "nvml", .message = "no driver", .step = "vae"});
  e = parse_event(event_line::encode_run_begin(run));
  EXPECT_EQ(e.type, EventType::kRunBegin);
  EXPECT_EQ(e.name, "t2i");
  EXPECT_EQ(e.pipeline.model, "sd15");
  EXPECT_EQ(e.pipeline.parameters.at("steps"), "20");
  EXPECT_EQ(e.labels.at("user"), "a");
  EXPECT_EQ(e.labels.at(event_line::kForwardedRunIdLabel), "ab12");

  e = parse_event(event_line::encode_run_end(run));
  EXPECT_EQ(e.type, EventType::kRunEnd);
  ASSERT_EQ(e.attachments.size(), 1u);
  EXPECT_EQ(e.attachments[0].name, "t");
  EXPECT_EQ(e.attachments[0].data, (nlohmann::json{{"a", 1}}));
  EXPECT_EQ(e.notes, std::vector<std::string>{"a note"});
  ASSERT_EQ(e.errors.size(), 1u);
  EXPECT_EQ(e.errors[0].message, "no driver");
  EXPECT_EQ(e.errors[0].step, "vae");
}

TEST(EventChannel, MalformedLinesAreCountedAndRecordedNeverFatal) {
  Harness h;
  h.session.event_line(R"({"event":"begin","kind":"sampling","name":"denoise"})", Step::now_ns());
  h.session.event_line("garbage", Step::now_ns());
  h.session.event_line(std::string(1 << 20, '{'), Step::now_ns());
  h.session.event_line(R"({"event":"iteration"})", Step::now_ns());
  h.session.event_line(R"({"event":"end"})", Step::now_ns());
  h.session.program_exited(0, Step::now_ns());
  ASSERT_EQ(h.runs.size(), 1u);
  EXPECT_EQ(h.session.stats().event_lines, 5u);
  EXPECT_EQ(h.session.stats().malformed_event_lines, 2u);
  ASSERT_EQ(h.runs[0].steps.size(), 1u);
  EXPECT_EQ(h.runs[0].steps[0].iteration_ns.size(), 1u);
  int malformed = 0;
  for (const MonitoringError& e : h.runs[0].monitoring_errors) {
    if (e.source == "events" && e.message.find("malformed event line") != std::string::npos) ++malformed;
  }
  EXPECT_EQ(malformed, 1);  // identical messages are counted, not repeated
}

TEST(Runs, AutoScopeEndsTheProgramRunAsStartupAtTheFirstAnnouncement) {
  Harness h;
  const std::int64_t t0 = Step::now_ns();
  h.session.start(t0);
  h.session.event_line(R"({"event":"begin","kind":"model_loading","name":"load"})", t0);
  h.session.event_line(R"({"event":"end"})", t0 + 1);
  h.session.event_line(R"({"event":"run_begin","name":"job 1","labels":{"job":"1"}})", t0 + 2);
  h.session.event_line(R"({"event":"begin","kind":"sampling","name":"denoise"})", t0 + 3);
  h.session.event_line(R"({"event":"end"})", t0 + 4);
  h.session.event_line(R"({"event":"run_end"})", t0 + 5);
  h.session.event_line(R"({"event":"begin","name":"between runs"})", t0 + 6);  // dropped
  h.session.event_line(R"({"event":"run_begin","name":"job 2"})", t0 + 7);
  EXPECT_NE(h.session.current_run(), nullptr);
  h.session.program_exited(9, t0 + 8);  // killed by SIGKILL in the middle of job 2
  ASSERT_EQ(h.runs.size(), 3u);
  EXPECT_EQ(h.runs[0].labels.at("watch.run"), "startup");
  ASSERT_EQ(h.runs[0].steps.size(), 1u);
  EXPECT_EQ(h.runs[1].labels.at("watch.run"), "announced");
  EXPECT_EQ(h.runs[1].labels.at("watch.announcement"), "job 1");
  EXPECT_EQ(h.runs[1].labels.at("job"), "1");
  ASSERT_EQ(h.runs[1].steps.size(), 1u);
  EXPECT_EQ(h.runs[1].steps[0].name, "denoise");
  EXPECT_EQ(h.runs[2].labels.at("watch.exit"), "signal 9 (SIGKILL)");
  EXPECT_EQ(h.session.stats().steps_outside_runs, 1u);
  EXPECT_EQ(h.session.stats().runs_finished, 3u);
}

TEST(Runs, ProgramScopeMakesAnnouncedRunsSteps) {
  WatchOptions o;
  o.runs = RunScope::kProgram;
  Harness h(o);
  const std::int64_t t0 = Step::now_ns();
  h.session.event_line(R"({"event":"run_begin","name":"job 1"})", t0);
  h.session.event_line(R"({"event":"begin","kind":"sampling","name":"denoise"})", t0 + 1);
  h.session.event_line(R"({"event":"end"})", t0 + 2);
  h.session.event_line(R"({"event":"run_end"})", t0 + 3);
  h.session.program_exited(0, t0 + 4);
  ASSERT_EQ(h.runs.size(), 1u);
  ASSERT_EQ(h.runs[0].steps.size(), 2u);
  EXPECT_EQ(h.runs[0].steps[0].name, "job 1");
  EXPECT_EQ(h.runs[0].steps[1].parent_id, h.runs[0].steps[0].id);
}

TEST(Runs, AnnouncedScopeRecordsNothingOutsideAnnouncedRuns) {
  WatchOptions o;
  o.runs = RunScope::kAnnounced;
  Harness h(o);
  const std::int64_t t0 = Step::now_ns();
  h.session.start(t0);
  EXPECT_EQ(h.session.current_run(), nullptr);
  h.session.event_line(R"({"event":"begin","name":"outside"})", t0);
  h.session.event_line(R"({"event":"run_begin"})", t0 + 1);
  h.session.event_line(R"({"event":"begin","name":"inside"})", t0 + 2);
  h.session.program_exited(0, t0 + 3);
  ASSERT_EQ(h.runs.size(), 1u);
  ASSERT_EQ(h.runs[0].steps.size(), 1u);
  EXPECT_EQ(h.runs[0].steps[0].name, "inside");
  EXPECT_EQ(h.runs[0].steps[0].status, StepStatus::kOk);  // the program exited 0
}

TEST(Runs, AFailedProgramFailsItsOpenSteps) {
  Harness h;
  const std::int64_t t0 = Step::now_ns();
  h.session.event_line(R"({"event":"begin","kind":"sampling","name":"denoise"})", t0);
  h.session.program_exited(3 << 8, t0 + 1);
  ASSERT_EQ(h.runs.size(), 1u);
  EXPECT_EQ(h.runs[0].steps[0].status, StepStatus::kFailed);
  EXPECT_NE(h.runs[0].steps[0].error_message.find("status 3"), std::string::npos);
  EXPECT_EQ(h.runs[0].labels.at("watch.exit"), "status 3");
}

TEST(Runs, ADisabledMonitorRecordsNothingAndBreaksNothing) {
  MonitorOptions mo = testing::quiet_monitor_options();
  mo.enabled = false;
  Harness h({}, mo);
  const std::int64_t t0 = Step::now_ns();
  h.session.output(2, "got prompt\nRequested to load SDXL\n", t0);
  h.session.event_line(R"({"event":"begin","name":"x"})", t0 + 1);
  h.session.output(2, "loaded completely; 1.00 MB usable, 1.00 MB loaded, full load: True\nPrompt executed in 1.00 seconds\n", t0 + 2);
  h.session.program_exited(0, t0 + 3);
  EXPECT_TRUE(h.runs.empty());
  EXPECT_EQ(h.session.stats().runs_finished, 0u);
  EXPECT_EQ(h.session.stats().recognized_lines, 4u);
}

TEST(Merging, AForwardedStepAndABarOfTheSameKindAreOneStep) {
  Harness h;
  const std::int64_t t0 = Step::now_ns();
  h.session.start(t0);
  // The in-process monitor's begin comes first, then the bar of the same loop.
  h.session.event_line(R"({"event":"begin","kind":"sampling","name":"denoise","ref":"42:1:0"})", t0);
  h.session.output(2, "\r  0%|          | 0/4 [00:00<?, ?it/s]", t0 + 1'000'000);
  h.session.output(2, "\r 50%|#####     | 2/4 [00:00<00:00, 10.0it/s]", t0 + 201'000'000);
  h.session.output(2, "\r100%|##########| 4/4 [00:00<00:00, 10.0it/s]", t0 + 401'000'000);
  h.session.output(2, "\n", t0 + 402'000'000);
  // Its record: exact iterations, an allocator figure, a counter.
  h.session.event_line(
      R"({"event":"step","ref":"42:1:0","start_steady_ns":0,"step":{"id":0,"name":"denoise","kind":"sampling","status":"ok","duration_ns":400000000,
          "iterations":{"durations_ns":[100000000,100000000,100000000,100000000]},"counters":{"latents":4},
          "metrics":[{"name":"torch.allocated_bytes","unit":"bytes","before":1,"after":2,"peak":3,"peak_source":"exact"},
                     {"name":"process.rss_bytes","unit":"bytes","before":10,"after":20,"peak":30,"peak_source":"exact"}]}})",
      t0 + 410'000'000);
  h.session.program_exited(0, t0 + 500'000'000);
  ASSERT_EQ(h.runs.size(), 1u);
  const genscope::Run& run = h.runs[0];
  ASSERT_EQ(run.steps.size(), 1u);
  const StepRecord& s = run.steps[0];
  EXPECT_EQ(s.name, "denoise");
  EXPECT_EQ(s.iteration_ns.size(), 4u);
  EXPECT_FALSE(s.iterations_inferred);  // the in-process durations, not the bar's
  EXPECT_EQ(s.counters.at("latents"), 4);
  ASSERT_NE(s.metric("torch.allocated_bytes"), nullptr);
  EXPECT_EQ(s.metric("torch.allocated_bytes")->peak, 3);
  // The parent's own process probe has process.rss_bytes: the child's is kept beside it.
  ASSERT_NE(s.metric("process.rss_bytes"), nullptr);
  ASSERT_NE(s.metric("inprocess.process.rss_bytes"), nullptr);
  EXPECT_EQ(s.metric("inprocess.process.rss_bytes")->peak, 30);
  EXPECT_EQ(s.labels.at("inprocess.duration_ns"), "400000000");
  EXPECT_EQ(s.labels.count("watch.duplicate_iterations"), 1u);  // the bar's were not recorded
}

TEST(Merging, AForwardedStepWithoutABeginIsAddedWithItsOwnTiming) {
  Harness h;
  const std::int64_t t0 = Step::now_ns();
  h.session.start(t0);
  h.session.event_line(R"({"event":"begin","kind":"custom","name":"outer"})", t0);
  h.session.event_line(
      R"({"event":"step","ref":"9:1:5","start_steady_ns":)" + std::to_string(t0 + 1000) +
          R"(,"step":{"id":5,"name":"encode","kind":"text_encoding","status":"failed","error":{"type":"RuntimeError","message":"bad token"},"duration_ns":250}})",
      t0 + 2000);
  h.session.event_line(R"({"event":"end"})", t0 + 3000);
  h.session.program_exited(0, t0 + 4000);
  ASSERT_EQ(h.runs.size(), 1u);
  const genscope::Run& run = h.runs[0];
  ASSERT_EQ(run.steps.size(), 2u);
  const StepRecord* encode = run.step("encode");
  ASSERT_NE(encode, nullptr);
  EXPECT_EQ(encode->duration_ns, 250);
  EXPECT_EQ(encode->status, StepStatus::kFailed);
  EXPECT_EQ(encode->error_type, "RuntimeError");
  EXPECT_EQ(encode->parent_id, run.step("outer")->id);
  EXPECT_FALSE(encode->metrics.empty());  // the parent's probe figures over its interval
  EXPECT_EQ(encode->metrics.front().peak_source, "endpoints");
}

}  // namespace
}  // namespace genscope
