// Tests of the exports (HTML report, Chrome trace, CSV) and their shared helpers: min/max
// downsampling, exact microsecond timestamps, track placement of overlapping steps,
// iteration grouping, RFC 4180 quoting, escaping in the HTML page.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "genscope/genscope.hpp"
#include "report/downsample.hpp"
#include "report/export_util.hpp"

namespace genscope {
namespace {

using nlohmann::json;

StepRecord make_step(int id, const std::string& name, std::int64_t start, std::int64_t duration,
                     int parent = -1, int thread = 0) {
  StepRecord s;
  s.id = id;
  s.parent_id = parent;
  s.name = name;
  s.kind = StepKind::kCustom;
  s.status = StepStatus::kOk;
  s.thread = thread;
  s.start_offset_ns = start;
  s.duration_ns = duration;
  return s;
}

Run make_run(std::size_t samples) {
  Run run;
  run.id = "0123456789abcdef0123456789abcdef";
  run.start_utc = "2026-11-21T12:00:00.000Z";
  run.duration_ns = 1'000'000'000;
  run.pipeline.name = "t2i";
  run.steps.push_back(make_step(0, "outer", 0, 600'000'000));
  run.steps.push_back(make_step(1, "inner", 100'000'000, 200'000'000, 0));
  run.steps.push_back(make_step(2, "overlapping", 500'000'000, 300'000'000, 0));
  run.steps.push_back(make_step(3, "other thread", 200'000'000, 100'000'000, -1, 1));
  run.series.metrics = {"process.rss_bytes", "system.used_percent"};
  run.series.units = {Unit::kBytes, Unit::kPercent};
  for (std::size_t i = 0; i < samples; ++i) {
    run.series.offset_ns.push_back(static_cast<std::int64_t>(i * 1'000'000'000 / samples));
    run.series.values.push_back(1e8 + static_cast<double>(i % 10));
    run.series.values.push_back(50.0);
  }
  run.series.samples_taken = samples;
  return run;
}

TEST(Downsample, KeepsEveryRowOfAShortSeries) {
  std::vector<std::int64_t> x{0, 1, 2, 3};
  std::vector<double> v{1, 2, 3, 4};
  EXPECT_EQ(detail::minmax_rows(x, v.data(), 1, 2), (std::vector<std::size_t>{0, 1, 2, 3}));
}

TEST(Downsample, KeepsSpikeDipGapAndEnds) {
  const std::size_t n = 100'000, spans = 500;
  std::vector<std::int64_t> x(n);
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = static_cast<std::int64_t>(i) * 10'000'000;  // 10 ms apart: overflows 64-bit x*spans
    v[i] = std::sin(static_cast<double>(i) / 50.0);
  }
  v[31'337] = 1e9;
  v[77'777] = -1e9;
  v[50'000] = kNaN;
  const std::vector<std::size_t> rows = detail::minmax_rows(x, v.data(), 1, spans);
  EXPECT_LE(rows.size(), 3 * spans + 2);
  EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end()));
  EXPECT_EQ(std::adjacent_find(rows.begin(), rows.end()), rows.end());
  for (std::size_t keep :
       {std::size_t{0}, std::size_t{31'337}, std::size_t{77'777}, std::size_t{50'000}, n - 1}) {
    EXPECT_TRUE(std::binary_search(rows.begin(), rows.end(), keep)) << keep;
  }
  // Each span keeps its own extremes: the kept values span the same range per span.
  double high = -1e300;
  for (std::size_t r : rows) high = std::isnan(v[r]) ? high : std::max(high, v[r]);
  EXPECT_EQ(high, 1e9);
}

TEST(Downsample, SurvivesExtremeAndUnsortedTimes) {
  std::vector<std::int64_t> x{std::numeric_limits<std::int64_t>::max(), 0,
                              std::numeric_limits<std::int64_t>::min(), 5, 7};
  std::vector<double> v{1, 2, 3, 4, 5};
  const auto rows = detail::minmax_rows(x, v.data(), 1, 1);
  EXPECT_FALSE(rows.empty());
  for (std::size_t r : rows) EXPECT_LT(r, x.size());
}

// Trace timestamps are whole microseconds, rounded half up and monotonic, so slices that
// touch or nest in nanoseconds still do after rounding (and add exactly as doubles).
TEST(ExportText, MicrosecondsRoundHalfUpAndKeepOrder) {
  using detail::round_us;
  EXPECT_EQ(round_us(12'490'533), 12'491);
  EXPECT_EQ(round_us(12'490'499), 12'490);
  EXPECT_EQ(round_us(12'490'500), 12'491);
  EXPECT_EQ(round_us(5'000), 5);
  EXPECT_EQ(round_us(1), 0);
  EXPECT_EQ(round_us(-1'500), -1);  // floor((-1500 + 500) / 1000)
  EXPECT_EQ(round_us(-1'501), -2);
  EXPECT_EQ(round_us(std::numeric_limits<std::int64_t>::max()),
            std::numeric_limits<std::int64_t>::max() / 1000);
  // The case: 134147.208 + 13256.315 µs as doubles ends after 147403.523.
  const std::int64_t a = 134'147'208, d = 13'256'315, b = a + d;
  EXPECT_EQ(static_cast<double>(round_us(a)) + static_cast<double>(round_us(b) - round_us(a)),
            static_cast<double>(round_us(b)));
  for (std::int64_t x = -3'000; x < 3'000; x += 7) EXPECT_LE(round_us(x), round_us(x + 1));
}

TEST(ExportText, NumbersAreShortestAndWholeNumbersAreIntegers) {
  auto num = [](double v) {
    std::string s;
    detail::append_number(s, v, "NA");
    return s;
  };
  EXPECT_EQ(num(1e8), "100000000");
  EXPECT_EQ(num(0.1), "0.1");
  EXPECT_EQ(num(-2.5), "-2.5");
  EXPECT_EQ(num(1e300), "1e+300");
  EXPECT_EQ(num(kNaN), "NA");
  EXPECT_EQ(num(std::numeric_limits<double>::infinity()), "NA");
}

TEST(ChromeTrace, NestingStepsAreSlicesAndOverlappingOnesAsync) {
  const genscope::Run run = make_run(10);
  const json trace = json::parse(render_chrome_trace(run));
  ASSERT_TRUE(trace.contains("traceEvents"));
  ASSERT_TRUE(trace.contains("metadata"));
  std::map<std::string, json> x, b;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "X") x[e["name"]] = e;
    if (e["ph"] == "b") b[e["name"]] = e;
  }
  EXPECT_EQ(x.size(), 3u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_TRUE(b.count("overlapping"));
  EXPECT_EQ(x["inner"]["ts"].get<double>(), 100000.0);
  EXPECT_EQ(x["inner"]["dur"].get<double>(), 200000.0);
  EXPECT_EQ(x["other thread"]["tid"], 2);
  EXPECT_EQ(trace["metadata"]["runs"][0]["id"], run.id);
}

TEST(ChromeTrace, IterationsGroupBeyondTheLimitAndStayInsideTheStep) {
  genscope::Run run = make_run(0);
  run.steps.resize(1);
  run.steps[0].duration_ns = 1000;
  for (int i = 0; i < 10; ++i) run.steps[0].iteration_ns.push_back(150);  // 1500 > 1000
  ChromeTraceOptions options;
  options.max_iteration_slices = 3;
  const json trace = json::parse(render_chrome_trace(run, options));
  std::vector<json> its;
  for (const json& e : trace["traceEvents"]) {
    // Slices under half a microsecond are on an async track (b/e): one "b" each.
    if (e.value("cat", "") == "iteration" && e["ph"] != "e") its.push_back(e);
  }
  ASSERT_EQ(its.size(), 3u);
  EXPECT_EQ(its[0]["name"], "iterations 1-3");
  EXPECT_EQ(its[2]["name"], "iterations 7-10");
  EXPECT_EQ(its[2]["args"]["count"], 4);
  for (const json& e : its) {
    const double end = e["ts"].get<double>() + (e["ph"] == "X" ? e["dur"].get<double>() : 0.0);
    EXPECT_LE(end, 1.0 + 1e-9);  // clamped to the 1 µs step
  }
}

TEST(ChromeTrace, CountersSkipRepeatsAndGapsAndConstantsGoToMetadata) {
  genscope::Run run = make_run(100);
  for (std::size_t i = 0; i < 100; ++i)
    run.series.values[i * 2] = i == 40 ? kNaN : (i < 50 ? 7.0 : 8.0);
  int rss = 0, percent = 0;
  const json trace = json::parse(render_chrome_trace(run));
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] != "C") continue;
    EXPECT_TRUE(e["args"]["value"].is_number());
    EXPECT_TRUE(e["ts"].is_number_integer());
    if (e["name"] == "process.rss_bytes") ++rss;
    if (e["name"] == "system.used_percent") ++percent;
  }
  EXPECT_EQ(rss, 2);      // 7 then 8: repeats and the NaN left out
  EXPECT_EQ(percent, 0);  // constant 50: no track ...
  EXPECT_EQ(trace["metadata"]["runs"][0]["series"]["constant"]["system.used_percent"],
            50.0);  // ... but kept
}

// A step's exact peak is a point of its counter track at its time, so the track reaches it
// even when no sample saw it; a high-water mark without a time takes the highest sample's.
TEST(ChromeTrace, ExactPeaksArePointsOfTheCounterTrack) {
  genscope::Run run = make_run(10);  // samples every 100 ms, rss 1e8 + i
  run.steps[1].metrics.push_back(
      {"process.rss_bytes", Unit::kBytes, 1e8, 1e8, 2.7e8, 50'000'123, "exact"});
  run.steps[3].metrics.push_back({"process.rss_bytes", Unit::kBytes, 1e8, 1e8, 3e8, -1, "exact"});
  run.steps[2].metrics.push_back({"process.rss_bytes", Unit::kBytes, 1e8, 1e8, 9e8, 10, "sampled"});
  const json trace = json::parse(render_chrome_trace(run));
  std::vector<std::pair<std::int64_t, double>> rss;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "C" && e["name"] == "process.rss_bytes") {
      rss.emplace_back(e["ts"].get<std::int64_t>(), e["args"]["value"].get<double>());
    }
  }
  auto has = [&](std::int64_t ts, double v) {
    return std::find(rss.begin(), rss.end(), std::make_pair(ts, v)) != rss.end();
  };
  EXPECT_TRUE(has(150'000, 2.7e8));  // inner starts at 100 ms, peak 50.000123 ms later
  EXPECT_TRUE(has(300'000, 3e8));    // no time: at the highest sample inside [200, 300] ms
  for (const auto& [ts, v] : rss) EXPECT_NE(v, 9e8);  // a sampled peak is already a sample
  EXPECT_TRUE(std::is_sorted(rss.begin(), rss.end(),
                             [](const auto& a, const auto& b) { return a.first < b.first; }));
}

TEST(ChromeTrace, InferredIterationsAreMarked) {
  genscope::Run run = make_run(0);
  run.steps[0].iteration_ns = {100'000'000, 100'000'000};
  run.steps[0].iterations_inferred = true;
  run.steps[1].iteration_ns = {50'000'000};
  const json trace = json::parse(render_chrome_trace(run));
  int inferred = 0, measured = 0;
  for (const json& e : trace["traceEvents"]) {
    const std::string cat = e.value("cat", "");
    if (cat == "iteration,inferred") {
      ++inferred;
      EXPECT_EQ(e["args"]["inferred"], true);
      EXPECT_EQ(e["args"]["step_id"], 0);
    } else if (cat == "iteration") {
      ++measured;
      EXPECT_FALSE(e["args"].contains("inferred"));
    }
    if (e.value("name", "") == "outer") EXPECT_EQ(e["args"]["iterations_inferred"], true);
  }
  EXPECT_EQ(inferred, 2);
  EXPECT_EQ(measured, 1);
}

TEST(Csv, QuotesFieldsAsRfc4180AndKeepsColumnsWithAnEmptyFirstField) {
  genscope::Run run = make_run(2);
  run.id = "";  // an empty first field must still be followed by its comma
  run.steps.resize(1);
  run.steps[0].name = "a, \"b\"\nc";
  const std::string steps = render_steps_csv(std::span<const genscope::Run>(&run, 1));
  EXPECT_NE(steps.find(",\"a, \"\"b\"\"\nc\","), std::string::npos) << steps;
  const std::string header = steps.substr(0, steps.find("\r\n"));
  const std::string row = steps.substr(steps.find("\r\n") + 2);
  auto fields = [](const std::string& line) {  // commas outside quotes
    std::size_t n = 1;
    bool quoted = false;
    for (char c : line.substr(0, line.rfind("\r\n"))) {
      if (c == '"') quoted = !quoted;
      if (c == ',' && !quoted) ++n;
    }
    return n;
  };
  EXPECT_EQ(fields(header), fields(row));
  const std::string series = render_series_csv(std::span<const genscope::Run>(&run, 1));
  EXPECT_EQ(series.substr(0, series.find("\r\n", 40) + 2),
            "run_id,offset_ns,metric,unit,value\r\n,0,process.rss_bytes,bytes,100000000\r\n");
}

TEST(HtmlReport, IsSelfContainedAndEscapesNames) {
  genscope::Run run = make_run(5000);
  run.steps[1].name = "</script><script>alert(1)</script> & <b>";
  const std::string html = render_html_report(run);
  // The name cannot end a script element early: the page has exactly its three scripts
  // (data, uPlot, the report's), and the name shows as text in the step table.
  std::size_t closes = 0;
  for (std::size_t at = html.find("</script>"); at != std::string::npos;
       at = html.find("</script>", at + 1)) {
    ++closes;
  }
  EXPECT_EQ(closes, 3u);
  EXPECT_NE(html.find("&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;"),
            std::string::npos);
  // No external resource: no src/href to anything but the page's own anchors.
  EXPECT_EQ(html.find(" src="), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("href=\"http"), std::string::npos);
  // The chart data is JSON that reads back, with every step and downsampled series.
  const std::string open = "<script type=\"application/json\" id=\"genscope-data\">";
  const std::size_t at = html.find(open) + open.size();
  const json data = json::parse(html.substr(at, html.find("</script>", at) - at));
  EXPECT_EQ(data["runs"][0]["steps"].size(), 4u);
  EXPECT_EQ(data["runs"][0]["steps"][1]["name"], run.steps[1].name);
  const json& memory = data["charts"][0];
  EXPECT_EQ(memory["id"], "memory");
  EXPECT_LE(memory["tables"][0]["x"].size(), 2 * HtmlReportOptions{}.chart_spans + 2);
  std::size_t rows = 0;
  for (std::size_t at_row = html.find("<tr data-step="); at_row != std::string::npos;
       at_row = html.find("<tr data-step=", at_row + 1)) {
    ++rows;
  }
  EXPECT_EQ(rows, run.steps.size());
}

TEST(HtmlReport, SeveralRunsOverlayInOneChart) {
  const genscope::Run a = make_run(100);
  genscope::Run b = make_run(50);
  b.id = "fedcba9876543210fedcba9876543210";
  b.pipeline.model = "sdxl";
  const std::vector<genscope::Run> runs{a, b};
  const std::string html = render_html_report(runs);
  // The header names a run's model only when it has one.
  EXPECT_NE(html.find("run 0123456789abcdef0123456789abcdef, started "), std::string::npos);
  EXPECT_NE(html.find("run fedcba9876543210fedcba9876543210, sdxl, started "), std::string::npos);
  const std::string open = "<script type=\"application/json\" id=\"genscope-data\">";
  const std::size_t at = html.find(open) + open.size();
  const json data = json::parse(html.substr(at, html.find("</script>", at) - at));
  EXPECT_EQ(data["runs"].size(), 2u);
  EXPECT_EQ(data["charts"][0]["tables"].size(), 2u);
  EXPECT_EQ(data["charts"][0]["tables"][1]["series"][0]["label"], "RAM (process RSS) · B");
}

}  // namespace
}  // namespace genscope
