// Tests of statistics on known distributions, run comparison (noise-aware verdicts) and
// regression detection.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "genscope/compare.hpp"
#include "genscope/regression.hpp"
#include "genscope/statistics.hpp"
#include "unit/perf_runs.hpp"

namespace genscope {
namespace {

using namespace testing_runs;

// --- statistics -------------------------------------------------------------------------

TEST(Statistics, MedianMadAndMannWhitneyKnownValues) {
  const std::vector<double> v = {1, 2, 3, 4, 100};
  EXPECT_DOUBLE_EQ(median(v), 3);
  EXPECT_DOUBLE_EQ(median_absolute_deviation(v), 1);
  const std::vector<double> even = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(median(even), 2.5);
  // Complete separation 5 vs 5: exact two-sided p = 2 / C(10,5) = 2/252.
  const std::vector<double> a = {1, 2, 3, 4, 5}, b = {6, 7, 8, 9, 10};
  const auto r = mann_whitney_u(a, b);
  EXPECT_DOUBLE_EQ(r.u, 0);
  EXPECT_NEAR(r.p_value, 2.0 / 252, 1e-12);
  // Same values: no evidence of a difference.
  EXPECT_NEAR(mann_whitney_u(a, a).p_value, 1, 1e-12);
  // Large samples with ties use the normal approximation (compare with scipy's value
  // for this input: U = 0, p = 1.2e-8 with tie + continuity correction).
  std::vector<double> x(30, 1.0), y(30, 2.0);
  for (int i = 0; i < 30; ++i) x[i] += i % 3, y[i] += 3 + i % 3;
  const auto big = mann_whitney_u(x, y);
  EXPECT_DOUBLE_EQ(big.u, 0);
  EXPECT_LT(big.p_value, 1e-8);
}

TEST(Statistics, BootstrapIntervalCoversTrueRatio) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> before(100, 2), after(80, 2);
  std::vector<double> a, b;
  for (int i = 0; i < 15; ++i) a.push_back(before(rng)), b.push_back(after(rng));
  const Interval ci = bootstrap_median_ratio(a, b);
  EXPECT_LT(ci.low, 0.8);
  EXPECT_GT(ci.high, 0.8);
  EXPECT_LT(ci.high, 0.85);
}

// Pure noise (2% jitter) must never give a verdict; a real 20% slowdown must.
TEST(Statistics, NoFalseVerdictOnNoiseAndSlowdownDetected) {
  std::mt19937_64 rng(12345);
  std::normal_distribution<double> jitter(1.0, 0.02);
  CompareOptions options;
  int false_verdicts = 0, detected = 0;
  for (int trial = 0; trial < 1000; ++trial) {
    std::vector<genscope::Run> before, after, slower;
    for (int i = 0; i < 5; ++i) {
      before.push_back(make_run(static_cast<std::int64_t>(4e9 * jitter(rng))));
      after.push_back(make_run(static_cast<std::int64_t>(4e9 * jitter(rng))));
      slower.push_back(make_run(static_cast<std::int64_t>(4.8e9 * jitter(rng))));
    }
    const auto same = compare_groups(before, after, nullptr, options);
    for (const auto& s : same.steps)
      if (s.step == "sampling" && s.verdict != "unchanged") ++false_verdicts;
    if (trial % 10 == 0) {
      const auto slow = compare_groups(before, slower, nullptr, options);
      for (const auto& s : slow.steps)
        if (s.step == "sampling" && s.verdict == "slower") ++detected;
    }
  }
  EXPECT_EQ(false_verdicts, 0);
  EXPECT_EQ(detected, 100);
}

TEST(Compare, SingleRunsSeedFigures) {
  genscope::Run before = make_run(int64_t(14.5 * kSec));  // 16 s total
  genscope::Run after = make_run(int64_t(0.9 * kSec));    // 2.4 s total
  after.steps[1].metrics[0].peak = 15e9;
  before.id = "A";
  after.id = "B";
  const Targets t = Targets::defaults();
  const RunComparison c = compare_runs(before, after, &t);
  ASSERT_EQ(c.steps.front().step, "(run)");
  const auto& total = c.steps.front();
  EXPECT_NEAR(total.improvement_percent, 85, 1e-9);
  EXPECT_NEAR(total.factor, 16 / 2.4, 1e-9);
  EXPECT_TRUE(total.significant);
  EXPECT_EQ(total.verdict, "faster");
  EXPECT_TRUE(std::isnan(total.p_value));
  EXPECT_NEAR(c.before_score, 31.25, 1e-9);
  EXPECT_DOUBLE_EQ(c.after_score, 100);
  EXPECT_FALSE(c.before_met);
  EXPECT_TRUE(c.after_met);
  const auto& sampling = c.steps[2];
  EXPECT_EQ(sampling.step, "sampling");
  EXPECT_DOUBLE_EQ(sampling.memory_change_bytes, -5e9);
  // The load step did not change.
  EXPECT_EQ(c.steps[1].verdict, "unchanged");
  EXPECT_FALSE(c.steps[1].significant);
  const auto j = to_json(c);
  EXPECT_EQ(j["steps"][0]["verdict"], "faster");
  EXPECT_NE(render_comparison(c).find("significant"), std::string::npos);
}

TEST(Compare, StepOnlyOnOneSideIsMissing) {
  genscope::Run before = make_run(kSec), after = make_run(kSec);
  after.steps.push_back(make_step(3, "upscale", StepKind::kCustom, 0, kSec));
  const auto c = compare_runs(before, after);
  bool found = false;
  for (const auto& s : c.steps)
    if (s.step == "upscale") found = s.verdict == "missing";
  EXPECT_TRUE(found);
}

// --- regressions ------------------------------------------------------------------------

std::vector<Observation> series(std::mt19937_64& rng, int n, double last_factor) {
  std::normal_distribution<double> jitter(1.0, 0.02);
  std::vector<Observation> out;
  for (int i = 0; i < n; ++i) {
    const double f = i == n - 1 ? last_factor : 1.0;
    out.push_back({"p", "sampling", i * kSec, 4e9 * f * jitter(rng), "r" + std::to_string(i)});
  }
  return out;
}

TEST(Regression, NoFalseRegressionOnNoiseAndSlowdownDetected) {
  std::mt19937_64 rng(99);
  int false_regressions = 0, detected = 0;
  for (int trial = 0; trial < 1000; ++trial) {
    const auto noise = series(rng, 21, 1.0);
    for (const auto& f : find_regressions(noise)) false_regressions += f.regression;
    const auto slow = series(rng, 21, 1.2);
    const auto findings = find_regressions(slow);
    ASSERT_EQ(findings.size(), 1u);
    detected += findings[0].regression;
    if (trial == 0) {
      EXPECT_EQ(findings[0].latest_run_ids, std::vector<std::string>{"r20"});
      EXPECT_EQ(findings[0].baseline_runs, 20u);
      EXPECT_NEAR(findings[0].change_percent, 20, 8);
    }
  }
  EXPECT_EQ(false_regressions, 0);
  EXPECT_GE(detected, 998);  // simulated detection rate 99.99% (docs/history.md)
}

TEST(Regression, WindowPipelineFilterAndTooFewRuns) {
  std::mt19937_64 rng(5);
  auto obs = series(rng, 4, 2.0);  // 3 baseline runs < min_baseline
  EXPECT_TRUE(find_regressions(obs).empty());
  auto more = series(rng, 30, 1.0);
  // An old slow period outside the window must not matter: only the last 10 are baseline.
  for (int i = 0; i < 15; ++i) more[i].duration_ns *= 3;
  RegressionOptions options;
  options.window = 10;
  EXPECT_FALSE(find_regressions(more, options)[0].regression);
  options.pipeline = "other";
  EXPECT_TRUE(find_regressions(more, options).empty());
  // A speed-up is never a regression.
  auto faster = series(rng, 21, 0.5);
  EXPECT_FALSE(find_regressions(faster)[0].regression);
  EXPECT_EQ(to_json(find_regressions(faster))[0]["regression"], false);
}

}  // namespace
}  // namespace genscope
