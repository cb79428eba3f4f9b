// Tests of the monitor core: steps, peaks (exact and nested), probe failures and hangs,
// exceptions, iterations, attempts, threads, the sampler bound and the log.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/time_series_buffer.hpp"
#include "genscope/genscope.hpp"
#include "genscope/history.hpp"

namespace genscope {
namespace {

using namespace std::chrono_literals;

// A probe whose value the test sets; it keeps its own high-water mark like VmHWM.
struct ScriptedState {
  std::atomic<double> value{10};
  std::atomic<double> hwm{10};
  std::atomic<bool> refuse_reset{false};
  std::atomic<bool> fail_sample{false};
  std::atomic<int> sample_sleep_ms{0};
  std::atomic<int> samples{0};  // sample() calls
  void set(double v) {
    value = v;
    if (v > hwm) hwm = v;
  }
};

class ScriptedProbe : public Probe {
 public:
  ScriptedProbe(std::shared_ptr<ScriptedState> s, bool blocking = false)
      : s_(std::move(s)), blocking_(blocking) {}
  std::string name() const override { return "scripted"; }
  const std::vector<MetricInfo>& metrics() const override { return metrics_; }
  ProbeStatus open() override { return {}; }
  ProbeStatus sample(std::span<double> out) override {
    if (s_->sample_sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(s_->sample_sleep_ms));
    if (s_->fail_sample) return ProbeStatus::failure("sensor unplugged");
    out[0] = s_->value;
    ++s_->samples;
    return {};
  }
  ProbeStatus read_peaks(std::span<double> out) override {
    out[0] = s_->hwm;
    return {};
  }
  ProbeStatus reset_peaks() override {
    if (s_->refuse_reset) return ProbeStatus::failure("reset refused by test");
    s_->hwm = s_->value.load();
    return {};
  }
  bool may_block() const override { return blocking_; }

 private:
  std::shared_ptr<ScriptedState> s_;
  bool blocking_;
  std::vector<MetricInfo> metrics_{{"scripted.value_bytes", Unit::kBytes, true}};
};

MonitorOptions quiet_options() {
  MonitorOptions o;
  o.process_probe = false;
  o.system_probe = false;
  o.nvml_probe = false;
  o.sampler = false;
  o.max_sample_interval = {};  // a fixed cadence: these tests count samples
  return o;
}

const MetricFigures& figure(const StepRecord& s) {
  const MetricFigures* m = s.metric("scripted.value_bytes");
  EXPECT_NE(m, nullptr);
  return *m;
}

TEST(Names, StepKindsRoundTrip) {
  for (StepKind k : {StepKind::kModelLoading, StepKind::kLoraApplication, StepKind::kTextEncoding,
                     StepKind::kLatentGeneration, StepKind::kSampling, StepKind::kVaeDecode,
                     StepKind::kSave, StepKind::kCustom}) {
    EXPECT_EQ(parse_step_kind(to_string(k)), k);
  }
  EXPECT_EQ(to_string(StepKind::kTextEncoding), "text_encoding");
  EXPECT_FALSE(parse_step_kind("denoise").has_value());
}

TEST(Monitor, ExactPeakBetweenSamples) {
  auto s = std::make_shared<ScriptedState>();
  Monitor monitor(quiet_options());
  monitor.add_probe(std::make_unique<ScriptedProbe>(s));
  ActiveRun run = monitor.start_run();
  constexpr double kMiB = 1 << 20;
  s->set(10 * kMiB);
  {
    Step step = run.step(StepKind::kSampling, "spiky");
    s->set(100 * kMiB);  // a spike no sample sees
    s->set(20 * kMiB);
  }
  const genscope::Run r = run.finish();
  ASSERT_EQ(r.steps.size(), 1u);
  const MetricFigures& m = figure(r.steps[0]);
  EXPECT_EQ(m.before, 10 * kMiB);
  EXPECT_EQ(m.after, 20 * kMiB);
  EXPECT_EQ(m.peak, 100 * kMiB);
  EXPECT_EQ(m.peak_source, "exact");
  EXPECT_EQ(m.peak_offset_ns, -1);  // the spike was never sampled: time unknown
  EXPECT_EQ(r.steps[0].status, StepStatus::kOk);
}

TEST(Monitor, NestedStepsKeepTheirOwnExactPeaks) {
  auto s = std::make_shared<ScriptedState>();
  Monitor monitor(quiet_options());
  monitor.add_probe(std::make_unique<ScriptedProbe>(s));
  ActiveRun run = monitor.start_run();
  {
    Step outer = run.step(StepKind::kVaeDecode, "outer");
    s->set(90);  // before the inner step: must count for outer only
    s->set(30);
    {
      Step inner = run.step(StepKind::kCustom, "inner");
      s->set(60);
      s->set(30);
    }
    s->set(40);
  }
  const genscope::Run r = run.finish();
  ASSERT_EQ(r.steps.size(), 2u);
  EXPECT_EQ(r.steps[0].name, "outer");
  EXPECT_EQ(r.steps[1].parent_id, r.steps[0].id);
  EXPECT_EQ(figure(r.steps[0]).peak, 90);
  EXPECT_EQ(figure(r.steps[1]).peak, 60);
  EXPECT_EQ(figure(r.steps[1]).before, 30);
}

TEST(Monitor, InnerPeakAlsoCountsForOuter) {
  auto s = std::make_shared<ScriptedState>();
  Monitor monitor(quiet_options());
  monitor.add_probe(std::make_unique<ScriptedProbe>(s));
  ActiveRun run = monitor.start_run();
  {
    Step outer = run.step(StepKind::kVaeDecode, "outer");
    {
      Step inner = run.step(StepKind::kCustom, "inner");
      s->set(75);
      s->set(10);
    }
  }
  const genscope::Run r = run.finish();
  EXPECT_EQ(figure(r.steps[0]).peak, 75);
  EXPECT_EQ(figure(r.steps[1]).peak, 75);
}

TEST(Monitor, RefusedResetFallsBackAndSaysSo) {
  auto s = std::make_shared<ScriptedState>();
  s->refuse_reset = true;
  Monitor monitor(quiet_options());
  monitor.add_probe(std::make_unique<ScriptedProbe>(s));
  ActiveRun run = monitor.start_run();
  {
    Step a = run.step(StepKind::kCustom, "a");
    s->set(100);
    s->set(20);
  }
  { Step b = run.step(StepKind::kCustom, "b"); }
  const genscope::Run r = run.finish();
  // Without a reset the high-water mark is not this step's: only endpoints are trusted.
  EXPECT_EQ(figure(r.steps[0]).peak_source, "endpoints");
  EXPECT_EQ(figure(r.steps[0]).peak, 20);
  int reset_notes = 0;
  for (const std::string& n : r.notes) reset_notes += n.find("reset refused") != std::string::npos;
  EXPECT_EQ(reset_notes, 1);
  ASSERT_EQ(r.monitoring_errors.size(), 1u) << r.monitoring_errors[1].message;  // once, not per step
}

TEST(Monitor, FailingProbeIsRecordedNeverThrown) {
  auto s = std::make_shared<ScriptedState>();
  s->fail_sample = true;
  Monitor monitor(quiet_options());
  monitor.add_probe(std::make_unique<ScriptedProbe>(s));
  ActiveRun run = monitor.start_run();
  for (int i = 0; i < 3; ++i) {
    Step step = run.step(StepKind::kCustom, "step");
  }
  const genscope::Run r = run.finish();
  EXPECT_EQ(r.steps.size(), 3u);
  ASSERT_EQ(r.monitoring_errors.size(), 1u);
  EXPECT_EQ(r.monitoring_errors[0].source, "scripted");
  EXPECT_NE(r.monitoring_errors[0].message.find("sensor unplugged"), std::string::npos);
  EXPECT_NE(r.monitoring_errors[0].message.find("repeated 6 times"), std::string::npos);
  EXPECT_TRUE(std::isnan(figure(r.steps[0]).before));
}

TEST(Monitor, HangingProbeIsAbandonedAfterTimeout) {
  auto s = std::make_shared<ScriptedState>();
  auto opts = quiet_options();
  opts.probe_timeout = 50ms;
  Monitor monitor(opts);
  monitor.add_probe(std::make_unique<ScriptedProbe>(s, /*blocking=*/true));
  ActiveRun run = monitor.start_run();
  s->sample_sleep_ms = 400;
  const auto t0 = std::chrono::steady_clock::now();
  {
    Step step = run.step(StepKind::kCustom, "while the driver hangs");
  }
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  // Start: one timed-out call (50 ms); end: fails at once because the call is still hung.
  EXPECT_LT(elapsed, 300ms);
  const genscope::Run r = run.finish();
  ASSERT_FALSE(r.monitoring_errors.empty());
  EXPECT_NE(r.monitoring_errors[0].message.find("did not return within 50 ms"), std::string::npos);
  EXPECT_EQ(r.steps[0].status, StepStatus::kOk);
}

TEST(Monitor, PipelineExceptionRecordedAndRethrownUnchanged) {
  Monitor monitor(quiet_options());
  ActiveRun run = monitor.start_run();
  struct PipelineError : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  EXPECT_THROW(run.run_step(StepKind::kVaeDecode, "decode",
                            [](Step&) { throw PipelineError("CUDA out of memory"); }),
               PipelineError);
  try {
    Step step = run.step(StepKind::kSave, "save");
    throw std::logic_error("raii");
  } catch (const std::logic_error&) {
  }
  const genscope::Run r = run.finish();
  ASSERT_EQ(r.steps.size(), 2u);
  EXPECT_EQ(r.steps[0].status, StepStatus::kFailed);
  EXPECT_EQ(r.steps[0].error_message, "CUDA out of memory");
  EXPECT_NE(r.steps[0].error_type.find("PipelineError"), std::string::npos);
  EXPECT_EQ(r.steps[1].status, StepStatus::kFailed);
  EXPECT_EQ(r.steps[1].error_message, "an exception propagated out of the step");
}

TEST(Monitor, RunStepReturnsTheValue) {
  Monitor monitor(quiet_options());
  ActiveRun run = monitor.start_run();
  const int v = run.run_step(StepKind::kCustom, "compute", [](Step&) { return 42; });
  EXPECT_EQ(v, 42);
}

TEST(Monitor, AttachToAStepAfterItEnded) {
  Monitor monitor(quiet_options());
  ActiveRun run = monitor.start_run();
  int id = -1;
  {
    Step text = run.step(StepKind::kTextEncoding, "text_encoder (prompt)");
    id = text.id();
  }  // ended
  Step open = run.step(StepKind::kSampling, "denoise");
  EXPECT_TRUE(run.attach_to_step(id, {"tensor", "conditioning (denoiser input)", {{"x", 1}}}));
  EXPECT_TRUE(run.attach_to_step(open.id(), {"tensor", "late", nullptr}));
  EXPECT_FALSE(run.attach_to_step(7, {"tensor", "nowhere", nullptr}));
  EXPECT_FALSE(run.attach_to_step(-1, {"tensor", "nowhere", nullptr}));
  open.end();
  const genscope::Run done = run.finish();
  ASSERT_EQ(done.steps.size(), 2u);
  ASSERT_EQ(done.steps[0].attachments.size(), 1u);
  EXPECT_EQ(done.steps[0].attachments[0].name, "conditioning (denoiser input)");
  EXPECT_EQ(done.steps[0].attachments[0].data["x"], 1);
  EXPECT_EQ(done.steps[1].attachments.size(), 1u);
  EXPECT_FALSE(run.attach_to_step(id, {"tensor", "after finish", nullptr}));
}

TEST(Monitor, AttemptsIterationsCountersSkip) {
  Monitor monitor(quiet_options());
  ActiveRun run = monitor.start_run();
  {
    Step step = run.step(StepKind::kLatentGeneration, "encode");
    EXPECT_FALSE(step.try_attempt("direct", [] { throw std::runtime_error("OOM"); }));
    EXPECT_TRUE(step.try_attempt("tiled", [] {}));
    step.add_counter("frames", 8);
    step.add_counter("frames", 8);
    step.begin_iterations();
    for (int i = 0; i < 5; ++i) {
      std::this_thread::sleep_for(1ms);
      step.mark_iteration();
    }
  }
  {
    Step step = run.step(StepKind::kTextEncoding, "negative prompt");
    step.skip("empty negative prompt");
  }
  const genscope::Run r = run.finish();
  const StepRecord& s = r.steps[0];
  ASSERT_EQ(s.attempts.size(), 2u);
  EXPECT_EQ(s.attempts[0].outcome, StepStatus::kFailed);
  EXPECT_EQ(s.attempts[0].error, "OOM");
  EXPECT_EQ(s.attempts[1].outcome, StepStatus::kOk);
  EXPECT_EQ(s.counters.at("frames"), 16);
  EXPECT_GT(s.rate("frames"), 0);
  ASSERT_EQ(s.iteration_ns.size(), 5u);
  for (auto d : s.iteration_ns) EXPECT_GE(d, 1'000'000);
  EXPECT_EQ(r.steps[1].status, StepStatus::kSkipped);
}

TEST(Monitor, IterationsAndFiguresMeasuredElsewhere) {
  Monitor m(quiet_options());
  ActiveRun run = m.start_run();
  {
    Step s = run.step(StepKind::kSampling, "bar");
    const std::int64_t d[] = {10, 20, 30};
    s.record_iterations(d, true);
    s.record_iterations({}, false);
    s.add_metric({"torch.allocated_bytes", Unit::kBytes, 1, 2, 3, -1, "exact"});
  }
  {
    Step s = run.step(StepKind::kSampling, "observed");
    const std::int64_t d[] = {5};
    s.record_iterations(d, false);
  }
  const genscope::Run r = run.finish();
  EXPECT_EQ(r.steps[0].iteration_ns, std::vector<std::int64_t>({10, 20, 30}));
  EXPECT_TRUE(r.steps[0].iterations_inferred);
  ASSERT_NE(r.steps[0].metric("torch.allocated_bytes"), nullptr);
  EXPECT_EQ(r.steps[0].metric("torch.allocated_bytes")->peak, 3);
  EXPECT_FALSE(r.steps[1].iterations_inferred);
}

TEST(Monitor, AddedStepGetsItsFiguresFromTheSamplesOfItsInterval) {
  auto state = std::make_shared<ScriptedState>();
  MonitorOptions o = quiet_options();
  o.sampler = true;
  o.sample_interval = 1ms;
  Monitor m(o);
  m.add_probe(std::make_unique<ScriptedProbe>(state));
  ActiveRun run = m.start_run();
  Step outer = run.step(StepKind::kCustom, "outer");
  std::this_thread::sleep_for(20ms);
  const std::int64_t start = Step::now_ns();
  state->set(500);
  std::this_thread::sleep_for(20ms);
  state->set(50);
  std::this_thread::sleep_for(20ms);
  StepRecord reported;
  reported.name = "reported";
  reported.kind = StepKind::kTextEncoding;
  reported.parent_id = outer.id();
  reported.duration_ns = Step::now_ns() - start;
  reported.counters["reported_seconds"] = 0.04;
  reported.metrics.push_back({"inprocess.x_bytes", Unit::kBytes, 1, 1, 1, -1, "exact"});
  const int id = run.add_step(reported, start);
  EXPECT_EQ(id, 1);
  StepRecord bad_parent = reported;
  bad_parent.parent_id = 99;
  EXPECT_EQ(run.add_step(bad_parent, start), 2);
  outer.end();
  const genscope::Run r = run.finish();
  ASSERT_EQ(r.steps.size(), 3u);
  const StepRecord& s = r.steps[1];
  EXPECT_EQ(s.name, "reported");
  EXPECT_EQ(s.status, StepStatus::kOk);
  EXPECT_EQ(s.parent_id, 0);
  EXPECT_EQ(r.steps[2].parent_id, -1);
  EXPECT_EQ(s.duration_ns, reported.duration_ns);
  EXPECT_GE(s.start_offset_ns, r.steps[0].start_offset_ns);
  const MetricFigures& f = figure(s);
  EXPECT_EQ(f.peak, 500);  // the sampler saw the spike inside the interval
  EXPECT_EQ(f.peak_source, "sampled");
  EXPECT_EQ(f.after, 50);
  ASSERT_NE(s.metric("inprocess.x_bytes"), nullptr);
  EXPECT_EQ(s.counters.at("reported_seconds"), 0.04);
}

TEST(Monitor, DisabledMonitorRecordsNothing) {
  auto o = quiet_options();
  o.enabled = false;
  Monitor monitor(o);
  ActiveRun run = monitor.start_run();
  EXPECT_FALSE(run.active());
  Step step = run.step(StepKind::kCustom, "x");
  EXPECT_FALSE(step.active());
  step.mark_iteration();
  step.add_counter("items", 1);
  EXPECT_TRUE(run.finish().steps.empty());
  Monitor on(quiet_options());
  on.set_enabled(false);
  EXPECT_FALSE(on.start_run().active());
}

TEST(Monitor, OneActiveRunAtATime) {
  Monitor monitor(quiet_options());
  ActiveRun a = monitor.start_run();
  try {
    monitor.start_run();
    FAIL() << "expected RunActive";
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "RunActive");
  }
  a.finish();
  EXPECT_TRUE(monitor.start_run().active());
}

// start_run is atomic: of 8 threads released at once, exactly one gets the run (issue 20:
// the check and the publication were two critical sections, 48 of 300 trials gave two runs).
TEST(Monitor, ConcurrentStartRunHasExactlyOneWinner) {
  Monitor monitor(quiet_options());
  constexpr int kThreads = 8;
  for (int trial = 0; trial < 300; ++trial) {
    std::atomic<int> ready{0}, won{0}, refused{0};
    std::atomic<bool> go{false};
    std::vector<ActiveRun> runs(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        ++ready;
        while (!go.load()) std::this_thread::yield();
        try {
          runs[t] = monitor.start_run();
          ++won;
        } catch (const Error& e) {
          if (e.name() == "RunActive") ++refused;
        }
      });
    }
    while (ready.load() < kThreads) std::this_thread::yield();
    go = true;
    for (std::thread& t : threads) t.join();
    ASSERT_EQ(won.load(), 1) << "trial " << trial;
    ASSERT_EQ(refused.load(), kThreads - 1) << "trial " << trial;
    for (ActiveRun& r : runs) r.finish();
  }
}

TEST(Monitor, MacroOpensAScope) {
  Monitor monitor(quiet_options());
  ActiveRun run = monitor.start_run();
  {
    GENSCOPE_STEP(run, StepKind::kSave, "save png");
  }
  const genscope::Run r = run.finish();
  ASSERT_EQ(r.steps.size(), 1u);
  EXPECT_NE(r.steps[0].source.find("core_test.cpp:"), std::string::npos);
}

TEST(Monitor, OpenStepsAreClosedByFinish) {
  Monitor monitor(quiet_options());
  ActiveRun run = monitor.start_run();
  Step dangling = run.step(StepKind::kCustom, "left open");
  const genscope::Run r = run.finish();
  EXPECT_EQ(r.steps[0].status, StepStatus::kFailed);
  dangling.end();  // harmless after finish
}

TEST(Monitor, StepsFromManyThreads) {
  auto s = std::make_shared<ScriptedState>();
  auto o = quiet_options();
  o.sampler = true;
  o.sample_interval = 1ms;
  Monitor monitor(o);
  monitor.add_probe(std::make_unique<ScriptedProbe>(s));
  ActiveRun run = monitor.start_run();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        Step outer = run.step(StepKind::kCustom, "outer " + std::to_string(t));
        Step inner = run.step(StepKind::kCustom, "inner " + std::to_string(t));
        inner.mark_iteration();
        inner.add_counter("items", 1);
        s->set(static_cast<double>(i));
      }
    });
  }
  for (auto& th : threads) th.join();
  const genscope::Run r = run.finish();
  ASSERT_EQ(r.steps.size(), 800u);
  std::set<int> ids;
  for (const StepRecord& st : r.steps) {
    ids.insert(st.id);
    EXPECT_EQ(st.status, StepStatus::kOk);
    if (st.name.rfind("inner", 0) == 0) {
      ASSERT_GE(st.parent_id, 0);
      const StepRecord& parent = r.steps[static_cast<std::size_t>(st.parent_id)];
      EXPECT_EQ(parent.thread, st.thread);
      EXPECT_EQ(parent.name.substr(6), st.name.substr(6));
    } else {
      EXPECT_EQ(st.parent_id, -1);
    }
  }
  EXPECT_EQ(ids.size(), 800u);
}

TEST(Sampler, FillsBoundedSeriesAndSampledPeaks) {
  auto s = std::make_shared<ScriptedState>();
  auto o = quiet_options();
  o.sampler = true;
  o.sample_interval = 1ms;
  o.series_capacity = 16;
  Monitor monitor(o);
  monitor.add_probe(std::make_unique<ScriptedProbe>(s));
  ActiveRun run = monitor.start_run();
  double top_value = 0;
  {
    Step step = run.step(StepKind::kSampling, "slow rise");
    // Rises for at least 60 ms and, on a loaded machine, until the sampler has taken 40
    // samples (bounded); then holds the top until the sampler has seen it twice.
    int i = 0;
    for (; i < 60 || (s->samples < 40 && i < 20'000); ++i) {
      s->set(100 + i);
      std::this_thread::sleep_for(1ms);
    }
    top_value = 100 + i - 1;
    const int seen = s->samples;
    for (int wait = 0; s->samples < seen + 2 && wait < 20'000; ++wait) std::this_thread::sleep_for(1ms);
    s->value = 5;  // below the mark: the step peak stays exact at the top
  }
  const genscope::Run r = run.finish();
  EXPECT_LE(r.series.size(), 16u);
  EXPECT_GT(r.series.samples_taken, 16u);
  EXPECT_EQ(r.series.metrics.size(), 1u);
  const MetricFigures& m = figure(r.steps[0]);
  EXPECT_EQ(m.peak, top_value);
  EXPECT_GE(m.peak_offset_ns, 0);  // the sampler saw it: its time is known
  // Downsampled rows keep maxima: the stored series still contains the top.
  double top = 0;
  for (std::size_t k = 0; k < r.series.size(); ++k) top = std::max(top, r.series.at(k, 0));
  EXPECT_EQ(top, top_value);
}

// The adaptive cadence (docs/probes.md, "Sampling cadence"): quiet samples double the
// interval up to the bound; a step boundary wakes a sampler in a long wait; a change of more
// than 2 % brings the fast interval back.
MonitorOptions adaptive_options(std::chrono::microseconds fast, std::chrono::microseconds slow) {
  MonitorOptions o = quiet_options();
  o.sampler = true;
  o.sample_interval = fast;
  o.max_sample_interval = slow;
  return o;
}

TEST(Sampler, AQuietRunIsSampledEverDoublingIntervalsUpToTheBound) {
  auto s = std::make_shared<ScriptedState>();
  Monitor monitor(adaptive_options(5ms, 160ms));
  monitor.add_probe(std::make_unique<ScriptedProbe>(s));
  ActiveRun run = monitor.start_run();
  std::this_thread::sleep_for(1200ms);
  const genscope::Run r = run.finish();
  EXPECT_EQ(r.series.interval_ns, 5'000'000);
  EXPECT_EQ(r.series.max_interval_ns, 160'000'000);
  // 5+10+20+40+80 ms, then every 160 ms: about 11 samples in 1.2 s (a fixed 5 ms cadence:
  // 240). Fewer on a loaded machine, never more.
  EXPECT_GE(r.series.samples_taken, 4u);
  EXPECT_LE(r.series.samples_taken, 16u);
  ASSERT_GE(r.series.size(), 4u);
  std::int64_t widest = 0;
  for (std::size_t i = 1; i < r.series.size(); ++i) {
    const std::int64_t gap = r.series.offset_ns[i] - r.series.offset_ns[i - 1];
    EXPECT_GT(gap, 4'000'000) << "row " << i;  // never faster than the fast interval
    widest = std::max(widest, gap);
  }
  EXPECT_GE(widest, 150'000'000);
  EXPECT_NE(render_console(r).find("sampled every 5.00 ms near events, up to 160.00 ms between"),
            std::string::npos);
}

TEST(Sampler, AStepBoundaryWakesTheSamplerFromALongWait) {
  auto s = std::make_shared<ScriptedState>();
  Monitor monitor(adaptive_options(5ms, 4000ms));
  monitor.add_probe(std::make_unique<ScriptedProbe>(s));
  ActiveRun run = monitor.start_run();
  std::this_thread::sleep_for(1500ms);  // the interval has grown to 640 ms and beyond
  {
    Step step = run.step(StepKind::kCustom, "wakes the sampler");
    std::this_thread::sleep_for(400ms);
  }
  const genscope::Run r = run.finish();
  // Without the wake-up the next sample would come at the end of a >= 640 ms wait; with it,
  // samples follow the boundary within a few fast intervals.
  const std::int64_t begin = r.steps[0].start_offset_ns;
  int inside = 0;
  for (std::size_t i = 0; i < r.series.size(); ++i) {
    if (r.series.offset_ns[i] >= begin && r.series.offset_ns[i] < begin + 300'000'000) ++inside;
  }
  EXPECT_GE(inside, 3) << "samples in the 300 ms after the step began";
}

TEST(Sampler, AChangeOfMoreThan2PercentKeepsTheFastInterval) {
  auto s = std::make_shared<ScriptedState>();
  Monitor monitor(adaptive_options(5ms, 4000ms));
  monitor.add_probe(std::make_unique<ScriptedProbe>(s));
  ActiveRun run = monitor.start_run();
  std::this_thread::sleep_for(1500ms);  // quiet: the interval has grown past 640 ms
  const std::int64_t quiet = run.snapshot().series.samples_taken;
  // Then the value doubles every 20 ms for 600 ms: once the sampler has seen one change it
  // samples at the fast interval for as long as the changes go on.
  const auto until = std::chrono::steady_clock::now() + 2600ms;
  double v = 10;
  while (std::chrono::steady_clock::now() < until) {
    v = v < 1e12 ? v * 2 : 10;
    s->set(v);
    std::this_thread::sleep_for(20ms);
  }
  const genscope::Run r = run.finish();
  const std::uint64_t busy = r.series.samples_taken - static_cast<std::uint64_t>(quiet);
  // A quiet sampler would take 1 or 2 samples in 2.6 s (4 s bound); a fast one hundreds.
  EXPECT_GE(busy, 30u) << "quiet " << quiet;
}

// A figure swinging inside the range it has already taken (a denoising loop freeing and
// allocating the same activations) is steady: the sampler slows down as for a quiet one, and
// a value past the range brings the fast interval back.
TEST(Sampler, ASwingInsideTheSeenRangeIsSteadyAndANewTopIsNot) {
  auto s = std::make_shared<ScriptedState>();
  Monitor monitor(adaptive_options(5ms, 500ms));
  monitor.add_probe(std::make_unique<ScriptedProbe>(s));
  ActiveRun run = monitor.start_run();
  const auto swing_until = std::chrono::steady_clock::now() + 1500ms;
  for (int i = 0; std::chrono::steady_clock::now() < swing_until; ++i) {
    s->set(i % 2 == 0 ? 100.0 : 130.0);  // ±30 % every 10 ms, the same two values
    std::this_thread::sleep_for(10ms);
  }
  const std::int64_t swinging = run.snapshot().series.samples_taken;
  // The fast cadence would take ~300 samples in 1.5 s; doubling from the first steady sample
  // up to 500 ms gives about 10.
  EXPECT_LE(swinging, 40) << "samples while swinging inside the range";
  // The sampler is in a 500 ms wait by now: the first sample after it sees the new top.
  const auto grow_until = std::chrono::steady_clock::now() + 1500ms;
  double v = 130;
  while (std::chrono::steady_clock::now() < grow_until) {
    v *= 1.5;  // a new top every 10 ms
    s->set(v);
    std::this_thread::sleep_for(10ms);
  }
  const genscope::Run r = run.finish();
  EXPECT_GE(static_cast<std::int64_t>(r.series.samples_taken) - swinging, 30)
      << "samples while the figure kept growing";
}

// The sampler reads /proc/meminfo at most every 100 ms and repeats the reading in the rows in
// between, while the process probe is read at every sample (docs/probes.md).
TEST(Sampler, ReadsTheSystemProbeEvery100ms) {
  auto o = quiet_options();
  o.process_probe = true;
  o.system_probe = true;
  o.sampler = true;
  o.sample_interval = 5ms;
  Monitor monitor(o);
  ActiveRun run = monitor.start_run();
  // Churn 16 MiB so that both the RSS and the machine's available memory keep moving.
  constexpr std::size_t kChurn = 16u << 20;
  const auto until = std::chrono::steady_clock::now() + 450ms;
  while (std::chrono::steady_clock::now() < until) {
    void* block = mmap(nullptr, kChurn, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(block, MAP_FAILED);
    std::memset(block, 1, kChurn);
    std::this_thread::sleep_for(3ms);
    munmap(block, kChurn);
    std::this_thread::sleep_for(3ms);
  }
  const genscope::Run r = run.finish();
  const auto column = [&](const std::string& name) {
    const auto it = std::find(r.series.metrics.begin(), r.series.metrics.end(), name);
    EXPECT_NE(it, r.series.metrics.end()) << name;
    return static_cast<std::size_t>(it - r.series.metrics.begin());
  };
  const std::size_t rss = column("process.rss_bytes");
  const std::size_t available = column("system.available_bytes");
  ASSERT_GT(r.series.size(), 20u);
  int rss_changes = 0, system_changes = 0;
  std::int64_t last_change = r.series.offset_ns[0];
  for (std::size_t i = 1; i < r.series.size(); ++i) {
    if (r.series.at(i, rss) != r.series.at(i - 1, rss)) ++rss_changes;
    EXPECT_FALSE(std::isnan(r.series.at(i, available)));  // repeated, never left empty
    if (r.series.at(i, available) != r.series.at(i - 1, available)) {
      ++system_changes;
      // A new reading comes >= 97.5 ms (100 ms less half a sample of timer jitter) after
      // the last; the row times carry the reads' own durations, hence the margin.
      EXPECT_GE(r.series.offset_ns[i] - last_change, 80'000'000) << "row " << i;
      last_change = r.series.offset_ns[i];
    }
  }
  EXPECT_LE(system_changes, 5);
  EXPECT_GT(rss_changes, system_changes);
}

TEST(TimeSeriesBuffer, CompactsOldHalfKeepingMaxima) {
  detail::TimeSeriesBuffer b(1, 8);
  for (int i = 0; i < 8; ++i) {
    const double v = (i == 1) ? 100 : i;
    b.push(i, std::span<const double>(&v, 1));
  }
  const double v = 8;
  b.push(8, std::span<const double>(&v, 1));  // triggers compaction of rows 0..3
  ASSERT_EQ(b.size(), 7u);
  EXPECT_EQ(b.times()[0], 0);
  EXPECT_EQ(b.values()[0], 100);  // max(0, 100)
  EXPECT_EQ(b.values()[1], 3);    // max(2, 3)
  EXPECT_EQ(b.values()[2], 4);
  EXPECT_EQ(b.values()[6], 8);
  EXPECT_EQ(b.pushed(), 9u);
}

TEST(Iterations, Summary) {
  std::vector<std::int64_t> d{300, 100, 100, 100, 200};
  const IterationStats s = summarize_iterations(d);
  EXPECT_EQ(s.count, 5u);
  EXPECT_EQ(s.first_ns, 300);
  EXPECT_EQ(s.mean_ns, 160);
  EXPECT_EQ(s.mean_rest_ns, 125);
  EXPECT_EQ(s.p50_ns, 100);
  EXPECT_DOUBLE_EQ(s.p95_ns, 280);  // linear interpolation, as NumPy
  EXPECT_NEAR(s.stddev_ns, 89.4427, 1e-3);
  EXPECT_NEAR(s.iterations_per_second, 5 / 800e-9, 1);
  EXPECT_EQ(summarize_iterations({}).count, 0u);
}

TEST(Figures, DeltasAndCleanup) {
  MetricFigures m;
  m.before = 100;
  m.peak = 300;
  m.after = 150;
  EXPECT_EQ(m.delta(), 50);
  EXPECT_EQ(m.delta_percent(), 50);
  EXPECT_EQ(m.cleanup_effectiveness(), 0.75);
  m.before = 0;
  EXPECT_TRUE(std::isnan(m.delta_percent()));
}

TEST(Log, LinesFromThreadsNeverInterleave) {
  const std::string path = std::string(std::getenv("GENSCOPE_TEST_TMP") ? std::getenv("GENSCOPE_TEST_TMP") : "/tmp") + "/core_test.log";
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::filesystem::remove(path);
  auto o = quiet_options();
  o.log_path = path;
  {
    Monitor monitor(o);
    ActiveRun run = monitor.start_run({.pipeline = {.name = "logtest"}});
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 50; ++i) Step s = run.step(StepKind::kCustom, std::string(200, 'x'));
      });
    }
    for (auto& th : threads) th.join();
    run.finish();
  }
  std::ifstream in(path);
  std::string line;
  int starts = 0, ends = 0, lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    ASSERT_EQ(line.find(" - INFO - "), 24u) << line;  // "YYYY-MM-DDTHH:MM:SS.mmmZ - INFO - "
    if (line.find("step start: ") != std::string::npos) ++starts;
    if (line.find("step end: ") != std::string::npos) {
      ++ends;
      EXPECT_NE(line.find("status=ok"), std::string::npos);
    }
  }
  EXPECT_EQ(starts, 200);
  EXPECT_EQ(ends, 200);
  EXPECT_EQ(lines, 402);  // + run started + run finished
}

}  // namespace
}  // namespace genscope

namespace genscope {
namespace {

TEST(Monitor, RecordsFinishedRunsInTheHistoryWhenAsked) {
  const char* base = std::getenv("GENSCOPE_TEST_TMP");
  const std::filesystem::path db = std::filesystem::path(base ? base : "/tmp") / "core_record.db";
  std::filesystem::remove(db);
  auto o = quiet_options();
  o.record = true;
  o.history_db = db.string();
  Monitor monitor(o);
  for (int i = 0; i < 2; ++i) {
    ActiveRun run = monitor.start_run({.pipeline = {.name = "recorded"}});
    { Step s = run.step(StepKind::kSampling, "denoise"); }
    EXPECT_TRUE(run.finish().monitoring_errors.empty());
  }
  EXPECT_EQ(HistoryStore(db).list({}).size(), 2u);
  // An unusable database is a monitoring error of the run, never an exception.
  o.history_db = "/proc/genscope-no-such-dir/history.db";
  Monitor broken(o);
  ActiveRun run = broken.start_run();
  const genscope::Run r = run.finish();
  ASSERT_EQ(r.monitoring_errors.size(), 1u);
  EXPECT_EQ(r.monitoring_errors[0].source, "history");
}

}  // namespace
}  // namespace genscope

namespace genscope {
namespace {

// Steps opening and closing on another thread reset the shared high-water mark all the time;
// a step that stays open must still see a spike that happened in between.
TEST(Monitor, ExactPeaksSurviveResetsFromOtherThreads) {
  auto s = std::make_shared<ScriptedState>();
  Monitor monitor(quiet_options());
  monitor.add_probe(std::make_unique<ScriptedProbe>(s));
  ActiveRun run = monitor.start_run();
  Step outer = run.step(StepKind::kSampling, "long step");
  std::atomic<bool> stop{false};
  std::atomic<int> churned{0};
  std::thread churn([&] {
    while (!stop) {
      Step quick = run.step(StepKind::kCustom, "quick");
      ++churned;
    }
  });
  // Each spike lasts until another thread has opened a step (folding and resetting the shared
  // mark) at least once. A spike that starts and ends inside the few instructions between a
  // fold and its reset is lost by any VmHWM-style mark (the kernel offers no atomic
  // read-and-reset); real allocations take far longer (docs/probes.md).
  for (int i = 0; i < 200; ++i) {
    const int seen = churned.load();
    s->set(1000 + i);  // a spike...
    for (int spin = 0; churned.load() < seen + 2 && spin < 1'000'000; ++spin) std::this_thread::yield();
    s->set(10);        // ...gone before any sample
  }
  stop = true;
  churn.join();
  outer.end();
  const genscope::Run r = run.finish();
  EXPECT_EQ(figure(r.steps[0]).peak, 1199);
  EXPECT_EQ(figure(r.steps[0]).peak_source, "exact");
}

}  // namespace
}  // namespace genscope
