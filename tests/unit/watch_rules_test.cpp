// Tests of rule files: every fixture in tests/fixtures/rules/ gives the error its
// expected_errors.json names (with the file, the rule and the cause in the message), the
// WatchSession constructor raises it before anything runs, a rule file turns a program's
// own output into runs and steps, and a regex that a backtracking engine would take
// exponential time over runs in linear time on a 1 MB line.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "genscope/error.hpp"
#include "watch/rule_file.hpp"
#include "watch_test_util.hpp"

namespace genscope {
namespace {

const std::filesystem::path kRules = std::filesystem::path(GENSCOPE_SOURCE_DIR) / "tests/fixtures/rules";

TEST(RuleFiles, EveryFixtureGivesItsExpectedError) {
  std::ifstream in(kRules / "expected_errors.json");
  const nlohmann::json expected = nlohmann::json::parse(in);
  std::size_t checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kRules)) {
    const std::string name = entry.path().filename().string();
    if (name == "expected_errors.json") continue;
    SCOPED_TRACE(name);
    ASSERT_TRUE(expected.contains(name)) << "fixture without an expected result";
    const nlohmann::json& e = expected[name];
    try {
      const watch::RuleFile f = watch::load_rule_file(entry.path());
      EXPECT_EQ(e.at("error"), "ok");
    } catch (const Error& err) {
      EXPECT_EQ(err.name(), e.at("error").get<std::string>());
      EXPECT_NE(std::string(err.what()).find(entry.path().string()), std::string::npos) << err.what();
      EXPECT_NE(std::string(err.what()).find(e.at("message").get<std::string>()), std::string::npos) << err.what();
    }
    ++checked;
  }
  EXPECT_EQ(checked, expected.size());
}

TEST(RuleFiles, UnreadableFilesAreNamedErrors) {
  for (const std::filesystem::path p : {kRules / "no such file.json", kRules}) {
    try {
      watch::load_rule_file(p);
      ADD_FAILURE() << p;
    } catch (const Error& e) {
      EXPECT_EQ(e.name(), "InvalidRules");
      EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos);
    }
  }
}

TEST(RuleFiles, TheSessionRejectsABadFileBeforeAnythingRuns) {
  Monitor monitor(testing::quiet_monitor_options());
  WatchOptions o;
  o.rule_files = {kRules / "mygen.rules.json", kRules / "bad_regex.json"};
  try {
    WatchSession session(monitor, o);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "InvalidRules");
    EXPECT_NE(std::string(e.what()).find("bad_regex.json"), std::string::npos);
  }
  WatchOptions unknown;
  unknown.recognizers = {"comfyui", "invokeai"};
  try {
    WatchSession session(monitor, unknown);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "UnknownRecognizer");
    EXPECT_NE(std::string(e.what()).find("invokeai"), std::string::npos);
  }
  // Nothing was started on the monitor: a run can start now.
  ActiveRun run = monitor.start_run();
  EXPECT_TRUE(run.active());
}

TEST(RuleFiles, LinearTimeOnPathologicalInput) {
  WatchOptions o;
  o.recognizers = {};
  o.rule_files = {kRules / "ok_linear_time.json"};
  testing::Harness h(o);
  const std::string line = std::string(1 << 20, 'a') + "b\n";
  const auto t0 = std::chrono::steady_clock::now();
  h.session.output(1, line, Step::now_ns());
  h.session.output(1, std::string(64, 'a') + "\n", Step::now_ns());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(seconds, 5.0);  // a backtracking engine needs 2^64 steps for the second line
  h.session.program_exited(0, Step::now_ns());
  ASSERT_EQ(h.runs.size(), 1u);
  EXPECT_EQ(h.runs[0].labels.count("k"), 1u);  // the 64-a line matched
  EXPECT_EQ(h.session.stats().cut_lines, 1u);
}

TEST(RuleFiles, AMatchWithoutAnOpenStepIsAMonitoringError) {
  WatchOptions o;
  o.recognizers = {};
  o.rule_files = {kRules / "mygen.rules.json"};
  testing::Harness h(o);
  const std::int64_t t0 = Step::now_ns();
  h.session.output(1, "Model ready in 1.00s (10 MB)\nwrote 3 frames\n", t0);
  h.session.program_exited(0, t0 + 1);
  ASSERT_EQ(h.runs.size(), 1u);
  bool found = false;
  for (const MonitoringError& e : h.runs[0].monitoring_errors) {
    found = found || (e.source.find("mygen.rules.json:loaded") != std::string::npos &&
                      e.message.find("no step of this rule file is open") != std::string::npos);
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace genscope
