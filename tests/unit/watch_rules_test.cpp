// Tests of rule files: every fixture in tests/fixtures/rules/ gives the error its
// expected_errors.json names (with the file, the rule and the cause in the message), the
// WatchSession constructor raises it before anything runs, a rule file turns a program's
// own output into runs and steps, and a regex that a backtracking engine would take
// exponential time over runs in linear time on a 1 MB line.
#include <gtest/gtest.h>
#include <unistd.h>

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

// Issue 20: rules whose DFA runs out of memory on every line stalled the watcher (80 MB of
// output still being read 300 s after the program ended). Now a line over the per-line
// budget turns the file off, named (RulesDisabled), and the rest is read at speed.
TEST(RuleFiles, ARuleSetWhoseDfaRunsOutOfMemoryIsDisabledNotAStall) {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("genscope-dfa-" + std::to_string(::getpid()) + ".json");
  {
    nlohmann::json rules = nlohmann::json::object();
    rules["rules"] = nlohmann::json::array();
    // Measured with libre2 2022-06-01: about 0.7 s per 16 KiB line, the DFA's cache reset
    // over and over (RE2::Set never gives up on a slow DFA).
    for (const char* regex : {"(a|b){1000}x", "(a|b){999}y", "(a|b)*a(a|b){30}", "(a|b)*b(a|b){29}c"}) {
      rules["rules"].push_back(
          {{"name", regex}, {"regex", regex}, {"action", "label"}, {"labels", {{"k", "v"}}}});
    }
    std::ofstream(file) << rules.dump();
  }
  WatchOptions o;
  o.recognizers = {};
  o.rule_files = {file};
  testing::Harness h(o);
  std::string text;
  std::uint32_t x = 12345;
  for (int line = 0; line < 100; ++line) {  // 100 lines of 16 KiB of random a/b (70 s before)
    for (int i = 0; i < 16000; ++i) {
      x = x * 1664525u + 1013904223u;
      text += (x >> 16) & 1 ? 'a' : 'b';
    }
    text += '\n';
  }
  const auto t0 = std::chrono::steady_clock::now();
  h.session.output(1, text, Step::now_ns());
  h.session.program_exited(0, Step::now_ns());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::filesystem::remove(file);
  EXPECT_LT(seconds, 10.0) << "1.6 MB of output took this long to watch";
  ASSERT_EQ(h.runs.size(), 1u);
  bool named = false;
  for (const MonitoringError& e : h.runs[0].monitoring_errors)
    named = named || e.message.rfind("RulesDisabled:", 0) == 0;
  EXPECT_TRUE(named) << "no RulesDisabled monitoring error";
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
