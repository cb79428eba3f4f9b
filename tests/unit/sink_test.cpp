// Tests of the live-event interface: order and content of the events, event masks, sinks
// that throw, block or fall behind (never the pipeline's problem), and several sinks at once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "genscope/genscope.hpp"

namespace genscope {
namespace {

using namespace std::chrono_literals;

MonitorOptions quiet_options() {
  MonitorOptions o;
  o.process_probe = false;
  o.system_probe = false;
  o.nvml_probe = false;
  o.sampler = false;
  o.max_sample_interval = {};  // a fixed cadence: these tests count samples
  return o;
}

// Records every event as a line of text, in delivery order.
class Recorder : public Sink {
 public:
  explicit Recorder(unsigned mask = kAllEvents) : mask_(mask) {}
  std::string name() const override { return "recorder"; }
  unsigned events() const override { return mask_; }
  void run_started(const Run& run) override {
    add("run_started " + run.pipeline.name + " columns=" + std::to_string(run.series.metrics.size()));
  }
  void step_began(const StepRecord& s) override {
    add("step_began " + std::to_string(s.id) + " " + s.name + " parent=" +
        std::to_string(s.parent_id) + " status=" + std::string(to_string(s.status)));
  }
  void iteration(int step, std::size_t index, std::int64_t ns) override {
    add("iteration " + std::to_string(step) + " #" + std::to_string(index) +
        (ns >= 0 ? "" : " negative"));
  }
  void attempt(int step, const Attempt& a) override {
    add("attempt " + std::to_string(step) + " " + a.strategy + " " + std::string(to_string(a.outcome)));
  }
  void step_ended(const StepRecord& s) override {
    add("step_ended " + std::to_string(s.id) + " " + s.name + " status=" +
        std::string(to_string(s.status)) + " iterations=" + std::to_string(s.iteration_ns.size()) +
        " counters=" + std::to_string(s.counters.size()));
  }
  void sample(std::int64_t, std::span<const double> values) override {
    ++samples;
    sample_width = values.size();
  }
  void monitoring_error(const MonitoringError& e) override { add("error " + e.source + ": " + e.message); }
  void run_finished(const Run& run) override {
    add("run_finished steps=" + std::to_string(run.steps.size()));
  }
  std::vector<std::string> lines() {
    std::lock_guard lock(mutex_);
    return lines_;
  }
  std::atomic<int> samples{0};
  std::atomic<std::size_t> sample_width{0};

 private:
  void add(std::string line) {
    std::lock_guard lock(mutex_);
    lines_.push_back(std::move(line));
  }
  unsigned mask_;
  std::mutex mutex_;
  std::vector<std::string> lines_;
};

TEST(Sink, ReceivesEveryEventInOrder) {
  Monitor monitor(quiet_options());
  auto recorder = std::make_shared<Recorder>();
  monitor.add_sink(recorder);
  ActiveRun run = monitor.start_run({.pipeline = {.name = "t2i"}});
  {
    Step outer = run.step(StepKind::kSampling, "denoise");
    for (int i = 0; i < 3; ++i) outer.mark_iteration();
    outer.add_counter("frames", 4);
    {
      Step inner = run.step(StepKind::kVaeDecode, "decode");
      inner.try_attempt("direct", [] { throw std::runtime_error("out of memory"); });
      inner.try_attempt("tiled", [] {});
    }
  }
  run.record_monitoring_error("probe-x", "sensor unplugged");
  const genscope::Run result = run.finish();
  EXPECT_TRUE(result.monitoring_errors.size() == 1) << result.monitoring_errors.size();
  const std::vector<std::string> expected = {
      "run_started t2i columns=0",
      "step_began 0 denoise parent=-1 status=running",
      "iteration 0 #0",
      "iteration 0 #1",
      "iteration 0 #2",
      "step_began 1 decode parent=0 status=running",
      "attempt 1 direct failed",
      "attempt 1 tiled ok",
      "step_ended 1 decode status=ok iterations=0 counters=0",
      "step_ended 0 denoise status=ok iterations=3 counters=1",
      "error probe-x: sensor unplugged",
      "run_finished steps=2",
  };
  EXPECT_EQ(recorder->lines(), expected);
}

TEST(Sink, StepBeganCarriesTheBaselineAndSamplesTheColumns) {
  MonitorOptions o = quiet_options();
  o.system_probe = true;
  o.sampler = true;
  o.sample_interval = 1ms;
  Monitor monitor(o);
  struct Baseline : Sink {
    std::string name() const override { return "baseline"; }
    void step_began(const StepRecord& s) override {
      for (const MetricFigures& m : s.metrics) {
        if (m.name == "system.used_bytes" && m.before > 0) saw_before = true;
      }
    }
    void sample(std::int64_t offset_ns, std::span<const double> v) override {
      if (offset_ns >= 0 && !v.empty()) ++samples;
    }
    std::atomic<bool> saw_before{false};
    std::atomic<int> samples{0};
  };
  auto sink = std::make_shared<Baseline>();
  monitor.add_sink(sink);
  ActiveRun run = monitor.start_run();
  {
    Step s = run.step(StepKind::kCustom, "wait");
    std::this_thread::sleep_for(30ms);
  }
  const genscope::Run r = run.finish();
  EXPECT_TRUE(sink->saw_before.load());
  EXPECT_GT(sink->samples.load(), 0);
  EXPECT_LE(static_cast<std::uint64_t>(sink->samples.load()), r.series.samples_taken);
}

TEST(Sink, OnlyTheSubscribedGroupsAreDelivered) {
  MonitorOptions o = quiet_options();
  o.sampler = true;
  o.sample_interval = 1ms;
  o.system_probe = true;
  Monitor monitor(o);
  auto steps_only = std::make_shared<Recorder>(Sink::kStepEvents);
  monitor.add_sink(steps_only);
  ActiveRun run = monitor.start_run();
  {
    Step s = run.step(StepKind::kSampling, "denoise");
    s.mark_iteration();
    std::this_thread::sleep_for(20ms);
  }
  run.record_monitoring_error("x", "y");
  run.finish();
  const std::vector<std::string> expected = {
      "step_began 0 denoise parent=-1 status=running",
      "step_ended 0 denoise status=ok iterations=1 counters=0",
  };
  EXPECT_EQ(steps_only->lines(), expected);
  EXPECT_EQ(steps_only->samples.load(), 0);
}

// A sink that throws is a monitoring error named after it; the others still get everything.
TEST(Sink, ThrowingSinkIsAMonitoringErrorNotThePipelines) {
  Monitor monitor(quiet_options());
  struct Thrower : Sink {
    std::string name() const override { return "thrower"; }
    void step_ended(const StepRecord&) override { throw std::runtime_error("disk on fire"); }
  };
  monitor.add_sink(std::make_shared<Thrower>());
  auto recorder = std::make_shared<Recorder>(Sink::kRunEvents);
  monitor.add_sink(recorder);
  ActiveRun run = monitor.start_run();
  for (int i = 0; i < 3; ++i) Step s = run.step(StepKind::kCustom, "step");
  const genscope::Run r = run.finish();
  ASSERT_EQ(r.monitoring_errors.size(), 1u);
  EXPECT_EQ(r.monitoring_errors[0].source, "thrower");
  EXPECT_EQ(r.monitoring_errors[0].message, "disk on fire (repeated 3 times)");
  EXPECT_EQ(recorder->lines().back(), "run_finished steps=3");
  for (const StepRecord& s : r.steps) EXPECT_EQ(s.status, StepStatus::kOk);
}

// A sink stuck in a call never stalls the pipeline: events beyond the queue are dropped and
// counted, finish() gives up after sink_timeout, and the monitor can still be destroyed.
TEST(Sink, BlockedSinkDropsEventsAndFinishGoesOn) {
  MonitorOptions o = quiet_options();
  o.sink_timeout = 200ms;
  o.sink_queue_capacity = 8;
  struct Gate {
    std::mutex m;
    std::condition_variable cv;
    bool open = false;
  };
  auto gate = std::make_shared<Gate>();
  struct Stuck : Sink {
    explicit Stuck(std::shared_ptr<Gate> g) : gate(std::move(g)) {}
    std::string name() const override { return "stuck"; }
    void step_began(const StepRecord&) override {
      std::unique_lock lock(gate->m);
      gate->cv.wait(lock, [&] { return gate->open; });
    }
    std::shared_ptr<Gate> gate;
  };
  genscope::Run r;
  {
    Monitor monitor(o);
    monitor.add_sink(std::make_shared<Stuck>(gate));
    ActiveRun run = monitor.start_run();
    for (int i = 0; i < 100; ++i) {
      Step s = run.step(StepKind::kCustom, "step");
      s.mark_iteration();
    }
    r = run.finish();
    ASSERT_EQ(r.steps.size(), 100u);
    bool dropped = false, gave_up = false;
    for (const MonitoringError& e : r.monitoring_errors) {
      if (e.source == "sinks" && e.message.find("events dropped") != std::string::npos) dropped = true;
      if (e.source == "sinks" && e.message.find("did not take the finished run") != std::string::npos) gave_up = true;
    }
    EXPECT_TRUE(dropped);
    EXPECT_TRUE(gave_up);
    {
      std::lock_guard lock(gate->m);
      gate->open = true;
    }
    gate->cv.notify_all();
  }  // the monitor's destructor waits for the (now released) dispatcher
}

// Sinks added after a run started take effect with the next run.
TEST(Sink, AddedSinkTakesEffectForTheNextRun) {
  Monitor monitor(quiet_options());
  auto first = std::make_shared<Recorder>(Sink::kRunEvents);
  monitor.add_sink(first);
  ActiveRun run = monitor.start_run({.pipeline = {.name = "a"}});
  auto second = std::make_shared<Recorder>(Sink::kRunEvents);
  monitor.add_sink(second);
  run.finish();
  run = monitor.start_run({.pipeline = {.name = "b"}});
  run.finish();
  EXPECT_EQ(first->lines().size(), 4u);
  const std::vector<std::string> expected = {"run_started b columns=0", "run_finished steps=0"};
  EXPECT_EQ(second->lines(), expected);
}

// Without sinks nothing is queued and no dispatcher thread exists; a disabled monitor sends
// nothing.
TEST(Sink, DisabledMonitorSendsNothing) {
  MonitorOptions o = quiet_options();
  o.enabled = false;
  Monitor monitor(o);
  auto recorder = std::make_shared<Recorder>();
  monitor.add_sink(recorder);
  ActiveRun run = monitor.start_run();
  { Step s = run.step(StepKind::kCustom, "x"); }
  run.finish();
  EXPECT_TRUE(recorder->lines().empty());
}

// The text log is a sink too: a log file that cannot be opened is the run's monitoring error
// "log", never an exception.
TEST(Sink, UnopenableLogFileIsAMonitoringError) {
  MonitorOptions o = quiet_options();
  o.log_path = "/proc/genscope-no-such-dir/run.log";
  Monitor monitor(o);
  ActiveRun run = monitor.start_run();
  { Step s = run.step(StepKind::kCustom, "x"); }
  const genscope::Run r = run.finish();
  ASSERT_EQ(r.monitoring_errors.size(), 1u);
  EXPECT_EQ(r.monitoring_errors[0].source, "log");
  EXPECT_NE(r.monitoring_errors[0].message.find("cannot open log file /proc/genscope-no-such-dir/run.log"),
            std::string::npos);
  EXPECT_EQ(r.steps.at(0).status, StepStatus::kOk);
}


// The journal writes at most once per min_interval; a step that ends within it must not wait
// for a step end that never comes (kill -9 during a long last step): the first sample after
// the interval writes it.
TEST(Journal, AStepHeldBackByTheIntervalIsWrittenByTheNextSample) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("genscope-journal-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path path = dir / "run.journal.json";
  std::shared_ptr<Sink> sink = make_journal_sink(path, 300ms);
  genscope::Run run;
  run.id = "journal-test";
  sink->run_started(run);
  StepRecord first;
  first.id = 0;
  first.name = "first";
  first.status = StepStatus::kOk;
  sink->step_ended(first);  // within 300 ms of the start's write: held back
  StepRecord second = first;
  second.id = 1;
  second.name = "second";
  std::this_thread::sleep_for(350ms);
  sink->step_ended(second);  // the interval since the start's write has passed: written
  StepRecord third = first;
  third.id = 2;
  third.name = "third";
  sink->step_ended(third);  // within 300 ms of the last write: held back
  EXPECT_EQ(read_run_file(path).steps.size(), 2u);
  const double row[1] = {1.0};
  sink->sample(0, row);  // still within the interval: nothing written
  EXPECT_EQ(read_run_file(path).steps.size(), 2u);
  std::this_thread::sleep_for(350ms);
  sink->sample(0, row);
  const genscope::Run journal = read_run_file(path);
  ASSERT_EQ(journal.steps.size(), 3u);
  EXPECT_EQ(journal.steps[2].name, "third");
  EXPECT_EQ(journal.labels.at("genscope.journal"), "partial");
  sink->run_finished(run);
  EXPECT_FALSE(std::filesystem::exists(path)) << "a finished run leaves no journal";
  std::filesystem::remove_all(dir);
}
}  // namespace
}  // namespace genscope
