// The step tree's invariants (include/genscope/step_tree.hpp): what normalize_step_tree does
// to each kind of broken tree, what check_step_tree reports, where summarize_step_time puts
// each moment, and a property test: random begin/end/iteration/timed-step sequences through
// the C++ API and the event channel always finish as a sound tree.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "genscope/genscope.hpp"

namespace genscope {
namespace {

constexpr std::int64_t kMs = 1'000'000;

StepRecord step(int id, int parent, std::int64_t start_ms, std::int64_t dur_ms,
                StepKind kind = StepKind::kCustom, std::string closed_by = kClosedExplicit) {
  StepRecord s;
  s.id = id;
  s.parent_id = parent;
  s.name = "s" + std::to_string(id);
  s.kind = kind;
  s.status = StepStatus::kOk;
  s.start_offset_ns = start_ms * kMs;
  s.duration_ns = dur_ms * kMs;
  s.closed_by = std::move(closed_by);
  return s;
}

genscope::Run run_of(std::int64_t dur_ms, std::vector<StepRecord> steps) {
  genscope::Run r;
  r.duration_ns = dur_ms * kMs;
  r.steps = std::move(steps);
  return r;
}

TEST(StepTree, AnExplicitParentKeepsItsBoundsAndTheChildMovesOut) {
  genscope::Run r = run_of(100, {step(0, -1, 10, 20), step(1, 0, 25, 30)});  // child ends at 55 > 30
  EXPECT_FALSE(check_step_tree(r).empty());
  normalize_step_tree(r);
  EXPECT_TRUE(check_step_tree(r).empty());
  EXPECT_EQ(r.steps[1].parent_id, -1);
  EXPECT_EQ(r.steps[0].duration_ns, 20 * kMs);
  EXPECT_NE(r.steps[1].labels.at("tree.reparented_from").find("step 0"), std::string::npos);
}

TEST(StepTree, AnInferredParentGrowsToHoldItsChild) {
  genscope::Run r = run_of(100, {step(0, -1, 0, 90), step(1, 0, 10, 20, StepKind::kCustom, "inferred:next step"),
                       step(2, 1, 5, 40)});
  normalize_step_tree(r);
  EXPECT_TRUE(check_step_tree(r).empty());
  EXPECT_EQ(r.steps[2].parent_id, 1);
  EXPECT_EQ(r.steps[1].start_offset_ns, 5 * kMs);
  EXPECT_EQ(r.steps[1].duration_ns, 40 * kMs);
  EXPECT_TRUE(r.steps[1].labels.count("tree.grown"));
}

TEST(StepTree, NoStepOutlivesItsRun) {
  genscope::Run r = run_of(50, {step(0, -1, -5, 20), step(1, -1, 40, 30), step(2, -1, 60, 5)});
  normalize_step_tree(r);
  EXPECT_TRUE(check_step_tree(r).empty()) << check_step_tree(r).front();
  EXPECT_EQ(r.steps[0].start_offset_ns, 0);
  EXPECT_EQ(r.steps[0].duration_ns, 15 * kMs);
  EXPECT_EQ(r.steps[1].duration_ns, 10 * kMs);
  EXPECT_EQ(r.steps[1].closed_by, kClosedRunEnd);
  EXPECT_EQ(r.steps[2].duration_ns, 0);
}

TEST(StepTree, ParentsThatNameNoEarlierStepAreDropped) {
  genscope::Run r = run_of(50, {step(0, 3, 0, 10), step(1, 1, 0, 10)});
  normalize_step_tree(r);
  EXPECT_TRUE(check_step_tree(r).empty());
  EXPECT_EQ(r.steps[0].parent_id, -1);
  EXPECT_EQ(r.steps[1].parent_id, -1);
}

TEST(StepTree, TheCheckerNamesWhatIsWrong) {
  genscope::Run r = run_of(50, {step(0, -1, 0, 10, StepKind::kCustom, "guessed"), step(1, 0, 5, 20)});
  r.steps.push_back(step(2, -1, 0, 5));
  r.steps[2].status = StepStatus::kRunning;
  const auto v = check_step_tree(r);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_NE(v[0].find("closed_by 'guessed'"), std::string::npos);
  EXPECT_NE(v[1].find("not within its parent"), std::string::npos);
  EXPECT_NE(v[2].find("still running"), std::string::npos);
}

TEST(StepTimeSummary, EachMomentCountsOnceForTheInnermostStep) {
  // 0-10 gap, 10-60 load (20-30 a nested text encoding), 40-80 sampling on another thread
  // (overlapping the load: the later start wins), 80-100 gap.
  genscope::Run r = run_of(100, {step(0, -1, 10, 50, StepKind::kModelLoading),
                       step(1, 0, 20, 10, StepKind::kTextEncoding),
                       step(2, -1, 40, 40, StepKind::kSampling)});
  r.steps[2].thread = 1;
  r.steps[1].inferred = true;
  const StepTimeSummary t = summarize_step_time(r);
  EXPECT_EQ(t.run_ns, 100 * kMs);
  EXPECT_EQ(t.top_level_ns, 70 * kMs);
  EXPECT_EQ(t.unattributed_ns, 30 * kMs);
  EXPECT_EQ(t.by_kind_ns.at(StepKind::kModelLoading), 20 * kMs);  // 10-20, 30-40
  EXPECT_EQ(t.by_kind_ns.at(StepKind::kTextEncoding), 10 * kMs);
  EXPECT_EQ(t.by_kind_ns.at(StepKind::kSampling), 40 * kMs);
  EXPECT_EQ(t.inferred_ns, 10 * kMs);
  ASSERT_EQ(t.gaps.size(), 2u);
  EXPECT_EQ(t.gaps[0], std::make_pair(std::int64_t{0}, 10 * kMs));
  EXPECT_EQ(t.gaps[1], std::make_pair(80 * kMs, 100 * kMs));
}

TEST(StepTree, TheConsoleReportCountsTopLevelTimeOnceAndShowsTheGap) {
  genscope::Run r = run_of(100, {step(0, -1, 10, 50), step(1, -1, 20, 10)});  // overlapping top level
  r.steps[1].thread = 1;
  const std::string out = render_console(r, {.plain = true});
  EXPECT_NE(out.find("top-level steps 50.00 ms"), std::string::npos) << out;
  EXPECT_NE(out.find("unattributed 50.00 ms"), std::string::npos) << out;
}

MonitorOptions quiet() {
  MonitorOptions o;
  o.process_probe = false;
  o.system_probe = false;
  o.nvml_probe = false;
  o.sampler = false;
  return o;
}

// Random begin/end/iteration/timed-step sequences through the C++ API.
TEST(StepTreeProperty, RandomApiSequencesFinishAsSoundTrees) {
  Monitor monitor(quiet());
  std::mt19937 rng(1234);
  for (int round = 0; round < 200; ++round) {
    ActiveRun run = monitor.start_run({});
    std::vector<Step> open;
    const std::int64_t t0 = Step::now_ns();
    const int ops = 1 + static_cast<int>(rng() % 60);
    for (int i = 0; i < ops; ++i) {
      const unsigned arg = rng() % 256;
      switch (rng() % 7) {
        case 0: open.push_back(run.step(static_cast<StepKind>(arg % 8), "s")); break;
        case 1: if (!open.empty()) open.pop_back(); break;
        case 2: if (!open.empty()) open[arg % open.size()].end(); break;
        case 3: if (!open.empty()) open[arg % open.size()].end_as("inferred:test"); break;
        case 4: {
          StepRecord r;
          r.name = "timed";
          r.duration_ns = (static_cast<std::int64_t>(arg) - 40) * kMs / 10;
          r.parent_id = static_cast<int>(arg % 9) - 2;
          r.closed_by = arg & 1 ? "inferred:test" : "";
          run.add_step(std::move(r), t0 + (static_cast<std::int64_t>(arg % 31) - 5) * kMs / 10);
          break;
        }
        case 5: if (!open.empty()) open.back().mark_iteration(); break;
        default: if (!open.empty()) open[arg % open.size()].mark_inferred("test"); break;
      }
    }
    const genscope::Run r = run.finish();
    const auto v = check_step_tree(r);
    ASSERT_TRUE(v.empty()) << "round " << round << ": " << v.front();
    for (const StepRecord& s : r.steps) EXPECT_FALSE(s.closed_by.empty());
  }
}

// Random event-channel sequences with read times that jump backwards.
TEST(StepTreeProperty, RandomEventSequencesFinishAsSoundTrees) {
  Monitor monitor(quiet());
  std::mt19937 rng(99);
  int runs = 0;
  for (int round = 0; round < 100; ++round) {
    WatchOptions options;
    options.runs = static_cast<RunScope>(round % 3);
    std::vector<std::string> problems;
    options.on_run_finished = [&](genscope::Run&& r) {
      ++runs;
      for (std::string& p : check_step_tree(r)) problems.push_back(std::move(p));
    };
    {
      WatchSession session(monitor, options);
      std::int64_t ts = Step::now_ns();
      session.start(ts);
      const int ops = static_cast<int>(rng() % 40);
      for (int i = 0; i < ops; ++i) {
        const unsigned arg = rng() % 256;
        ts += static_cast<std::int64_t>(arg) * 100'000 - (arg % 7 == 0 ? 30 * kMs : 0);
        switch (rng() % 6) {
          case 0: session.event_line(R"({"event":"begin","name":"b","kind":"sampling"})", ts); break;
          case 1: session.event_line(R"({"event":"end"})", ts); break;
          case 2: session.event_line(R"({"event":"iteration"})", ts); break;
          case 3:
            session.event_line(R"({"event":"step","start_steady_ns":)" + std::to_string(ts - arg * kMs) +
                                   R"(,"step":{"id":0,"parent_id":-1,"name":"fw","kind":"custom","status":"ok","thread":0,"start_offset_ns":0,"duration_ns":)" +
                                   std::to_string(arg * 2 * kMs) + R"(,"metrics":[],"attempts":[]}})",
                               ts);
            break;
          case 4: session.event_line(arg & 1 ? R"({"event":"run_begin","name":"r"})" : R"({"event":"run_end"})", ts); break;
          default: session.event_line(R"({"event":"begin","name":"c"})", ts); break;
        }
      }
      session.program_exited(round % 5 == 0 ? 9 : 0, ts + 1);
    }
    ASSERT_TRUE(problems.empty()) << "round " << round << ": " << problems.front();
  }
  EXPECT_GT(runs, 50);
}

}  // namespace
}  // namespace genscope
