// Tests of the Prometheus / OpenMetrics output: number formatting and escaping against the
// formats' rules, names of every probe figure, histogram invariants, whole expositions
// checked by an independent checker and by the real promtool, the live endpoint over real
// HTTP (current step, format negotiation, a port in use), live == replayed figures, and the
// Pushgateway client on malformed and unreachable URLs and a gateway that refuses.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include "fuzz/exposition_check.hpp"
#include "genscope/genscope.hpp"
#include "report/metrics_exposition.hpp"
#include "report/metrics_model.hpp"
#include "sinks/pushgateway_counters.hpp"
#include "sinks/pushgateway_sink.hpp"

namespace genscope {
namespace {

using namespace std::chrono_literals;
using detail::format_canonical_bound;
using detail::format_metric_number;

std::filesystem::path scratch_dir() {
  const char* env = std::getenv("GENSCOPE_TEST_TMP");
  std::filesystem::path dir = std::filesystem::path(env != nullptr ? env : "/tmp") /
                              ("metrics_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

// Runs `promtool check metrics` (Debian's prometheus package) on `text`: exit code and output.
std::pair<int, std::string> promtool_check(const std::string& text) {
  const auto path = scratch_dir() / "exposition.prom";
  std::ofstream(path, std::ios::binary) << text;
  const std::string cmd = "promtool check metrics < '" + path.string() + "' 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  std::string out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// A port nothing listens on: bound by the kernel, then released.
int closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// A run with everything the model exposes, names that need escaping included.
Run rich_run() {
  Run run;
  run.id = "r1";
  run.start_unix_ns = 1'700'000'000'000'000'000;
  run.duration_ns = 5'000'000'000;
  run.host.hostname = "worker-1";
  run.pipeline = {"t2i", "sd\"15\"", "UNet", {{"seed", "42"}}};
  run.gpus.push_back({0, "Fake H200", "GPU-fake-0", "550.54.15", 150e9});
  run.series.metrics = {"process.rss_bytes", "system.used_bytes", "system.used_percent",
                        "gpu0.used_bytes", "gpu0.utilization_percent", "gpu0.power_watts",
                        "alloc.cuda:0.allocated_bytes"};
  run.series.units = {Unit::kBytes, Unit::kBytes,   Unit::kPercent, Unit::kBytes,
                      Unit::kPercent, Unit::kWatts, Unit::kBytes};
  run.series.offset_ns = {0, 10'000'000};
  run.series.values = {1e8, 2e9, 10, 1e9, 50, 300, 5e8,  //
                       3e8, 2.5e9, 12, 4e9, 97, 450, 6e8};
  run.series.samples_taken = 2;
  auto step = [&](int id, StepKind kind, std::string name, std::int64_t ns, StepStatus status) {
    StepRecord s;
    s.id = id;
    s.kind = kind;
    s.name = std::move(name);
    s.duration_ns = ns;
    s.status = status;
    s.metrics.push_back({"process.rss_bytes", Unit::kBytes, 1e8, 2e8, 3.5e8, 5, "exact"});
    s.metrics.push_back({"gpu0.used_bytes", Unit::kBytes, 1e9, 2e9, 4.2e9, 5, "sampled"});
    run.steps.push_back(std::move(s));
    return &run.steps.back();
  };
  step(0, StepKind::kModelLoading, "load unet", 1'000'000'000, StepStatus::kOk);
  StepRecord* sampling = step(1, StepKind::kSampling, "denoise", 2'000'000'000, StepStatus::kOk);
  sampling->iteration_ns = {400'000'000, 100'000'000, 100'000'000, 100'000'000};
  sampling->counters["frames"] = 16;
  StepRecord* decode = step(2, StepKind::kVaeDecode, "decode \"tile\"\\1\nnext \xff", 500'000'000,
                            StepStatus::kFailed);
  decode->attempts.push_back({"direct", StepStatus::kFailed, "oom", 1});
  decode->attempts.push_back({"tiled", StepStatus::kOk, "", 2});
  run.monitoring_errors.push_back({"nvml", "hung", 0, ""});
  run.monitoring_errors.push_back({"nvml", "hung again", 0, ""});
  return run;
}

// --- numbers, escaping, names ------------------------------------------------------------

// The canonical renderings listed in OpenMetrics.md "Considerations: Canonical Numbers".
TEST(MetricsText, CanonicalNumbersAsTheOpenMetricsSpecLists) {
  const std::vector<std::pair<double, std::string>> cases = {
      {0.0, "0.0"},     {0.001, "0.001"}, {0.002, "0.002"}, {0.01, "0.01"},  {0.1, "0.1"},
      {0.9, "0.9"},     {0.95, "0.95"},   {0.99, "0.99"},   {0.999, "0.999"}, {1.0, "1.0"},
      {1.7, "1.7"},     {10.0, "10.0"},   {1e-10, "1e-10"}, {1e-9, "1e-09"}, {1e-5, "1e-05"},
      {1e-4, "0.0001"}, {1e5, "100000.0"}, {1e6, "1e+06"},  {1e10, "1e+10"},
      {INFINITY, "+Inf"}};
  for (const auto& [v, text] : cases) EXPECT_EQ(format_canonical_bound(v), text) << v;
}

TEST(MetricsText, ValuesAreShortestRoundTripLikeGo) {
  EXPECT_EQ(format_metric_number(0), "0");
  EXPECT_EQ(format_metric_number(42), "42");
  EXPECT_EQ(format_metric_number(-2.5), "-2.5");
  EXPECT_EQ(format_metric_number(123456789), "1.23456789e+08");
  EXPECT_EQ(format_metric_number(306045000), "3.06045e+08");
  EXPECT_EQ(format_metric_number(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(format_metric_number(NAN), "NaN");
  EXPECT_EQ(format_metric_number(-INFINITY), "-Inf");
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    double v;
    const std::uint64_t bits = rng();
    std::memcpy(&v, &bits, sizeof v);
    if (!std::isfinite(v)) continue;
    const std::string s = format_metric_number(v);
    EXPECT_EQ(std::strtod(s.c_str(), nullptr), v) << s;
  }
}

TEST(MetricsText, EscapesLabelValuesAndHelp) {
  using detail::escape_help;
  using detail::escape_label_value;
  EXPECT_EQ(escape_label_value("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(escape_label_value("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(escape_label_value("bad \xff\xfe end"), "bad \xEF\xBF\xBD\xEF\xBF\xBD end");
  EXPECT_EQ(escape_label_value("cut \xe2\x82"), "cut \xEF\xBF\xBD\xEF\xBF\xBD");
  // Neither format has an escape for CR, and OpenMetrics forbids it anywhere.
  EXPECT_EQ(escape_label_value("a\rb"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(escape_help("a\rb", MetricsFormat::kPrometheusText), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(escape_help("a \"q\" \\ \n", MetricsFormat::kPrometheusText), "a \"q\" \\\\ \\n");
  EXPECT_EQ(escape_help("a \"q\" \\ \n", MetricsFormat::kOpenMetrics), "a \\\"q\\\" \\\\ \\n");
}

TEST(MetricsText, EveryProbeFigureHasAConventionalName) {
  struct Case {
    const char* column;
    Unit unit;
    const char* family;
    const char* unit_name;
    const char* label;
    const char* peak;
  };
  const Case cases[] = {
      {"process.rss_bytes", Unit::kBytes, "genscope_process_resident_memory_bytes", "bytes", "",
       "genscope_process_resident_memory_peak_bytes"},
      {"tree.rss_bytes", Unit::kBytes, "genscope_process_tree_resident_memory_bytes", "bytes", "",
       "genscope_process_tree_resident_memory_peak_bytes"},
      {"system.total_bytes", Unit::kBytes, "genscope_system_memory_total_bytes", "bytes", "", ""},
      {"system.available_bytes", Unit::kBytes, "genscope_system_memory_available_bytes", "bytes", "", ""},
      {"system.used_bytes", Unit::kBytes, "genscope_system_memory_used_bytes", "bytes", "",
       "genscope_system_memory_used_peak_bytes"},
      {"system.used_percent", Unit::kPercent, "genscope_system_memory_used_ratio", "ratio", "", ""},
      {"gpu0.total_bytes", Unit::kBytes, "genscope_gpu_memory_total_bytes", "bytes", "0", ""},
      {"gpu1.used_bytes", Unit::kBytes, "genscope_gpu_memory_used_bytes", "bytes", "1",
       "genscope_gpu_memory_used_peak_bytes"},
      {"gpu0.free_bytes", Unit::kBytes, "genscope_gpu_memory_free_bytes", "bytes", "0", ""},
      {"gpu0.reserved_bytes", Unit::kBytes, "genscope_gpu_memory_reserved_bytes", "bytes", "0", ""},
      {"gpu0.utilization_percent", Unit::kPercent, "genscope_gpu_utilization_ratio", "ratio", "0", ""},
      {"gpu0.memory_utilization_percent", Unit::kPercent, "genscope_gpu_memory_utilization_ratio",
       "ratio", "0", ""},
      {"gpu0.temperature_celsius", Unit::kCelsius, "genscope_gpu_temperature_celsius", "celsius", "0", ""},
      {"gpu0.power_watts", Unit::kWatts, "genscope_gpu_power_watts", "watts", "0", ""},
      {"gpu12.sm_clock_hertz", Unit::kHertz, "genscope_gpu_sm_clock_hertz", "hertz", "12", ""},
      {"gpu0.memory_clock_hertz", Unit::kHertz, "genscope_gpu_memory_clock_hertz", "hertz", "0", ""},
      {"gpu0.process_used_bytes", Unit::kBytes, "genscope_gpu_process_memory_used_bytes", "bytes",
       "0", "genscope_gpu_process_memory_used_peak_bytes"},
      {"alloc.cuda:0.allocated_bytes", Unit::kBytes, "genscope_allocator_allocated_bytes", "bytes",
       "cuda:0", "genscope_allocator_allocated_peak_bytes"},
      {"alloc.cuda:1.reserved_bytes", Unit::kBytes, "genscope_allocator_reserved_bytes", "bytes",
       "cuda:1", "genscope_allocator_reserved_peak_bytes"},
      // Figures of probes genscope does not know: snake case of the name, unit suffix added.
      {"cgroup.memory.current_bytes", Unit::kBytes, "genscope_cgroup_memory_current_bytes", "bytes", "", ""},
      {"cgroup.pressure", Unit::kPercent, "genscope_cgroup_pressure_ratio", "ratio", "", ""},
      {"Fan.Speed-RPM", Unit::kCount, "genscope_fan_speed_rpm", "", "", ""},
      {"steps.total", Unit::kCount, "genscope_steps_total_value", "", "", ""},
  };
  for (const Case& c : cases) {
    const detail::ColumnMetric m = detail::map_column(c.column, c.unit);
    EXPECT_EQ(m.family, c.family) << c.column;
    EXPECT_EQ(m.unit, c.unit_name) << c.column;
    EXPECT_EQ(m.peak_family, c.peak) << c.column;
    EXPECT_TRUE(detail::is_valid_metric_name(m.family)) << m.family;
    EXPECT_FALSE(m.help.empty()) << c.column;
    if (!m.unit.empty()) EXPECT_TRUE(m.family.ends_with("_" + m.unit)) << m.family;
    if (*c.label != '\0') {
      ASSERT_EQ(m.labels.size(), 1u) << c.column;
      EXPECT_EQ(m.labels[0].second, c.label);
      EXPECT_TRUE(detail::is_valid_label_name(m.labels[0].first));
    } else {
      EXPECT_TRUE(m.labels.empty()) << c.column;
    }
    EXPECT_EQ(m.scale, c.unit == Unit::kPercent ? 0.01 : 1.0) << c.column;
  }
}

TEST(MetricsText, HistogramIsCumulativeWithInclusiveBounds) {
  detail::DurationHistogram h;
  for (double v : {0.0, 0.001, 0.0010001, 0.5, 1.0, 3000.0}) h.observe(v);
  h.observe(NAN);
  h.observe(-1);
  EXPECT_EQ(h.count, 6u);
  EXPECT_DOUBLE_EQ(h.sum, 0.0 + 0.001 + 0.0010001 + 0.5 + 1.0 + 3000.0);
  const std::vector<std::uint64_t> c = h.cumulative();
  ASSERT_EQ(c.size(), detail::kDurationBounds.size());
  EXPECT_EQ(c[0], 2u);  // le=0.001 holds 0 and exactly 0.001
  EXPECT_EQ(c[1], 3u);  // le=0.0025
  for (std::size_t i = 1; i < c.size(); ++i) EXPECT_GE(c[i], c[i - 1]);
  EXPECT_EQ(c.back(), 5u);  // 3000 s is only in +Inf (== count)
  for (std::size_t i = 1; i < detail::kDurationBounds.size(); ++i) {
    EXPECT_LT(detail::kDurationBounds[i - 1], detail::kDurationBounds[i]);
  }
}

TEST(MetricsText, NegotiatesTheFormatFromAccept) {
  const auto om = MetricsFormat::kOpenMetrics;
  const auto text = MetricsFormat::kPrometheusText;
  // What Prometheus 2.42 sends (prometheus/prometheus scrape/scrape.go scrapeAcceptHeader).
  EXPECT_EQ(negotiate_metrics_format(
                "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
                "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
            om);
  EXPECT_EQ(negotiate_metrics_format(""), text);
  EXPECT_EQ(negotiate_metrics_format("*/*"), text);
  EXPECT_EQ(negotiate_metrics_format("text/plain"), text);
  EXPECT_EQ(negotiate_metrics_format("application/openmetrics-text"), om);
  EXPECT_EQ(negotiate_metrics_format("application/openmetrics-text; version=0.0.1"), text);
  EXPECT_EQ(negotiate_metrics_format("text/plain;q=1, application/openmetrics-text;q=0.5"), text);
  EXPECT_EQ(negotiate_metrics_format("text/plain;q=0.2, application/openmetrics-text;q=0.5"), om);
  EXPECT_EQ(negotiate_metrics_format("application/openmetrics-text;q=0"), text);
  EXPECT_EQ(negotiate_metrics_format("application/json"), text);
  EXPECT_EQ(negotiate_metrics_format(",,;;q=,"), text);
  EXPECT_EQ(metrics_content_type(text), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(metrics_content_type(om), "application/openmetrics-text; version=1.0.0; charset=utf-8");
}

// --- whole expositions -------------------------------------------------------------------

TEST(MetricsExposition, RichRunIsValidInBothFormats) {
  const genscope::Run run = rich_run();
  const std::string text = render_metrics(run);
  const std::string om = render_metrics(run, MetricsFormat::kOpenMetrics);
  EXPECT_EQ(fuzz::check_exposition(text, false), "") << text;
  EXPECT_EQ(fuzz::check_exposition(om, true), "") << om;
  EXPECT_TRUE(om.ends_with("# EOF\n"));
  EXPECT_EQ(text.find("# EOF"), std::string::npos);
  EXPECT_EQ(text.find("# UNIT"), std::string::npos);

  // Figures.
  auto has = [&](const std::string& line) {
    EXPECT_NE(text.find("\n" + line + "\n"), std::string::npos) << line << "\n" << text;
  };
  has("genscope_run_info{pipeline=\"t2i\",model=\"sd\\\"15\\\"\",architecture=\"UNet\"} 1");
  has("genscope_run_active 0");
  has("genscope_run_duration_seconds 5");
  has("genscope_runs_total{status=\"failed\"} 1");
  has("genscope_steps_total{kind=\"vae_decode\",status=\"failed\"} 1");
  has("genscope_step_duration_seconds_bucket{kind=\"sampling\",le=\"2.5\"} 1");
  has("genscope_step_duration_seconds_bucket{kind=\"sampling\",le=\"1\"} 0");
  has("genscope_step_duration_seconds_count{kind=\"sampling\"} 1");
  has("genscope_step_last_duration_seconds{kind=\"vae_decode\",step=\"decode \\\"tile\\\"\\\\1\\nnext "
      "\xEF\xBF\xBD\"} 0.5");
  has("genscope_step_attempts_total{kind=\"vae_decode\",strategy=\"direct\",outcome=\"failed\"} 1");
  has("genscope_iterations_total{kind=\"sampling\"} 4");
  has("genscope_iteration_duration_seconds_bucket{kind=\"sampling\",le=\"0.1\"} 3");
  EXPECT_NE(text.find("\ngenscope_iterations_per_second{kind=\"sampling\",step=\"denoise\"} 5.71428571"),
            std::string::npos);  // 4 iterations in 0.7 s
  has("genscope_work_total{kind=\"sampling\",counter=\"frames\"} 16");
  has("genscope_process_resident_memory_bytes 3e+08");
  has("genscope_process_resident_memory_peak_bytes 3.5e+08");
  has("genscope_gpu_memory_used_bytes{gpu=\"0\"} 4e+09");
  has("genscope_gpu_memory_used_peak_bytes{gpu=\"0\"} 4.2e+09");
  has("genscope_gpu_utilization_ratio{gpu=\"0\"} 0.97");
  has("genscope_gpu_power_watts{gpu=\"0\"} 450");
  has("genscope_system_memory_used_ratio 0.12");
  has("genscope_allocator_allocated_bytes{device=\"cuda:0\"} 6e+08");
  has("genscope_allocator_allocated_peak_bytes{device=\"cuda:0\"} 6e+08");
  has("genscope_gpu_info{gpu=\"0\",name=\"Fake H200\",uuid=\"GPU-fake-0\",driver_version=\"550.54.15\"} 1");
  // One quantity per name: each memory figure's step peak is its own family.
  has("genscope_step_last_gpu_memory_used_peak_bytes{kind=\"model_loading\",step=\"load "
      "unet\",gpu=\"0\"} 4.2e+09");
  has("genscope_step_last_process_resident_memory_peak_bytes{kind=\"model_loading\",step=\"load "
      "unet\"} 3.5e+08");
  EXPECT_EQ(text.find("figure="), std::string::npos);
  has("genscope_monitoring_errors_total{source=\"nvml\"} 2");
  has("genscope_samples_total 2");
  // Low cardinality: the run id, seed and host are not labels.
  EXPECT_EQ(text.find("r1"), std::string::npos);
  EXPECT_EQ(text.find("seed"), std::string::npos);
  EXPECT_EQ(text.find("worker-1"), std::string::npos);
  // OpenMetrics: counter families without _total, canonical le, UNIT lines.
  EXPECT_NE(om.find("# TYPE genscope_steps counter\n"), std::string::npos);
  EXPECT_NE(om.find("# UNIT genscope_step_duration_seconds seconds\n"), std::string::npos);
  EXPECT_NE(om.find("le=\"1.0\"} 0\n"), std::string::npos);
  EXPECT_NE(om.find("# UNIT genscope_gpu_utilization_ratio ratio\n"), std::string::npos);
}

TEST(MetricsExposition, PromtoolFindsNothingToLint) {
  for (const genscope::Run& run : {rich_run(), genscope::Run{}}) {
    const auto [rc, out] = promtool_check(render_metrics(run));
    EXPECT_EQ(rc, 0) << out;
    EXPECT_EQ(out, "") << out;
  }
}

// Aggregates count each moment once: a step nested in another of the same kind (whose
// counters already sum its child's) adds to neither the duration histogram nor the work.
TEST(MetricsExposition, NestedStepsAreNotCountedTwice) {
  genscope::Run run;
  run.start_unix_ns = 1'700'000'000'000'000'000;
  run.duration_ns = 1'000'000'000;
  genscope::StepRecord outer;
  outer.id = 0;
  outer.kind = StepKind::kModelLoading;
  outer.name = "load checkpoint";
  outer.status = StepStatus::kOk;
  outer.duration_ns = 125'000'000;
  outer.counters = {{"bytes", 83e6}};
  genscope::StepRecord inner = outer;
  inner.id = 1;
  inner.parent_id = 0;
  inner.name = "load unet";
  inner.duration_ns = 120'000'000;
  run.steps = {inner, outer};  // finished in this order
  const std::string text = render_metrics(run);
  auto has = [&](const std::string& line) {
    EXPECT_NE(text.find("\n" + line + "\n"), std::string::npos) << line << "\n" << text;
  };
  has("genscope_work_bytes_total{kind=\"model_loading\",counter=\"bytes\"} 8.3e+07");
  has("genscope_step_duration_seconds_sum{kind=\"model_loading\"} 0.125");
  has("genscope_step_duration_seconds_count{kind=\"model_loading\"} 1");
  has("genscope_steps_total{kind=\"model_loading\",status=\"ok\"} 2");  // two steps ended
}

// A push adds the group's current totals (the Pushgateway's /api/v1/metrics answer) to the
// run's counters and histograms, so they keep counting across pushes; other groups and
// gauges are left alone, and series only the group has are kept.
TEST(Pushgateway, CountersCarryTheGroupsTotalsOver) {
  const genscope::Run run = rich_run();  // one failed run, one sampling step
  std::vector<detail::MetricFamily> families =
      detail::MetricsModel::from_run(run).families(run.start_unix_ns);
  const nlohmann::json answer = nlohmann::json::parse(R"({"status": "success", "data": [
    {"labels": {"job": "genscope", "instance": "other"},
     "genscope_runs_total": {"type": "COUNTER", "metrics": [
       {"labels": {"job": "genscope", "instance": "other", "status": "failed"}, "value": "100"}]}},
    {"labels": {"job": "genscope", "instance": "w1"},
     "genscope_runs_total": {"type": "COUNTER", "metrics": [
       {"labels": {"job": "genscope", "instance": "w1", "status": "failed"}, "value": "2"},
       {"labels": {"job": "genscope", "instance": "w1", "status": "ok"}, "value": "5"}]},
     "genscope_run_active": {"type": "GAUGE", "metrics": [
       {"labels": {"job": "genscope", "instance": "w1"}, "value": "7"}]},
     "genscope_step_duration_seconds": {"type": "HISTOGRAM", "metrics": [
       {"labels": {"job": "genscope", "instance": "w1", "kind": "sampling"},
        "buckets": {"2.5": "3", "1": "1"}, "count": "3", "sum": "4.5"}]}}]})");
  detail::add_pushed_totals(families, answer, "genscope", "w1");
  const std::string text = detail::write_exposition(families, MetricsFormat::kPrometheusText);
  auto has = [&](const std::string& line) {
    EXPECT_NE(text.find("\n" + line + "\n"), std::string::npos) << line << "\n" << text;
  };
  has("genscope_runs_total{status=\"failed\"} 3");  // 2 before + this run
  has("genscope_runs_total{status=\"ok\"} 5");      // kept although this run failed
  has("genscope_run_active 0");                     // a gauge: this run's
  has("genscope_step_duration_seconds_bucket{kind=\"sampling\",le=\"2.5\"} 4");
  has("genscope_step_duration_seconds_bucket{kind=\"sampling\",le=\"1\"} 1");
  has("genscope_step_duration_seconds_count{kind=\"sampling\"} 4");
  has("genscope_step_duration_seconds_sum{kind=\"sampling\"} 6.5");
  EXPECT_EQ(fuzz::check_exposition(text, false), "") << text;
  // An answer that is not the API's changes nothing.
  std::vector<detail::MetricFamily> again =
      detail::MetricsModel::from_run(run).families(run.start_unix_ns);
  detail::add_pushed_totals(again, nlohmann::json::parse(R"({"data": 3})"), "genscope", "w1");
  EXPECT_EQ(detail::write_exposition(again, MetricsFormat::kPrometheusText), render_metrics(run));
}

TEST(MetricsExposition, EmptyRunAndNaNFiguresStayValid) {
  genscope::Run run = rich_run();
  for (double& v : run.series.values) v = NAN;
  run.steps.clear();
  const std::string text = render_metrics(run);
  EXPECT_EQ(fuzz::check_exposition(text, false), "") << text;
  EXPECT_EQ(text.find("genscope_gpu_memory_used_bytes{"), std::string::npos);  // NaN: left out
  EXPECT_EQ(fuzz::check_exposition(render_metrics(genscope::Run{}, MetricsFormat::kOpenMetrics), true), "");
}

TEST(MetricsExposition, StepNamesAreBoundedForCardinality) {
  genscope::Run run;
  for (int i = 0; i < 300; ++i) {
    StepRecord s;
    s.id = i;
    s.name = "frame " + std::to_string(i);
    s.duration_ns = 1'000'000;
    s.status = StepStatus::kOk;
    run.steps.push_back(s);
  }
  const std::string text = render_metrics(run);
  std::size_t n = 0;
  for (std::size_t p = 0; (p = text.find("\ngenscope_step_last_duration_seconds{", p)) != std::string::npos; ++p) ++n;
  EXPECT_EQ(n, detail::MetricsModel::kMaxStepNames);
  EXPECT_NE(text.find("genscope_step_duration_seconds_count{kind=\"custom\"} 300"), std::string::npos);
}

// --- live endpoint -----------------------------------------------------------------------

MonitorOptions quiet() {
  MonitorOptions o;
  o.process_probe = false;
  o.system_probe = false;
  o.nvml_probe = false;
  o.sampler = false;
  return o;
}

// Polls GET /metrics until `needle` appears (the dispatcher delivers asynchronously).
std::string scrape_until(int port, const std::string& needle, const httplib::Headers& headers = {}) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(2s);
  client.set_read_timeout(2s);
  std::string last;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto res = client.Get("/metrics", headers); res && res->status == 200) {
      last = res->body;
      if (last.find(needle) != std::string::npos) return last;
    }
    std::this_thread::sleep_for(10ms);
  }
  ADD_FAILURE() << "never saw " << needle << " in\n" << last;
  return last;
}

TEST(MetricsEndpointTest, ServesTheCurrentStepOverHttp) {
  auto endpoint = std::make_shared<MetricsEndpoint>();  // 127.0.0.1, a free port
  ASSERT_NE(endpoint->port(), 0) << endpoint->error();
  EXPECT_EQ(endpoint->url(), "http://127.0.0.1:" + std::to_string(endpoint->port()) + "/metrics");
  MonitorOptions o = quiet();
  o.system_probe = true;
  o.sampler = true;
  o.sample_interval = 2ms;
  o.max_sample_interval = o.sample_interval;  // a fixed cadence
  Monitor monitor(o);
  monitor.add_sink(endpoint);
  const int port = endpoint->port();

  // Before any run: the build info only, valid.
  const std::string idle = scrape_until(port, "genscope_build_info");
  EXPECT_EQ(fuzz::check_exposition(idle, false), "") << idle;

  ActiveRun run = monitor.start_run({.pipeline = {.name = "t2i", .model = "sdxl"}});
  {
    Step load = run.step(StepKind::kModelLoading, "load unet");
  }
  {
    Step step = run.step(StepKind::kSampling, "denoise");
    step.begin_iterations();
    for (int i = 0; i < 3; ++i) {
      std::this_thread::sleep_for(2ms);
      step.mark_iteration();
    }
    const std::string live = scrape_until(
        port, "genscope_current_step_iterations{kind=\"sampling\",step=\"denoise\",thread=\"0\"} 3");
    EXPECT_EQ(fuzz::check_exposition(live, false), "") << live;
    EXPECT_NE(live.find("genscope_run_active 1\n"), std::string::npos);
    EXPECT_NE(live.find("genscope_current_step_elapsed_seconds{kind=\"sampling\",step=\"denoise\","
                        "thread=\"0\"} "),
              std::string::npos);
    EXPECT_NE(live.find("genscope_iterations_per_second{kind=\"sampling\",step=\"denoise\"} "),
              std::string::npos);
    EXPECT_NE(live.find("genscope_steps_total{kind=\"model_loading\",status=\"ok\"} 1\n"),
              std::string::npos);
    EXPECT_NE(scrape_until(port, "genscope_system_memory_used_bytes ").find("genscope_samples_total"),
              std::string::npos);

    // A scraper asking for OpenMetrics (as Prometheus does) gets it, with its content type.
    httplib::Client client("127.0.0.1", port);
    auto res = client.Get("/metrics", {{"Accept", "application/openmetrics-text;version=1.0.0,"
                                                  "text/plain;version=0.0.4;q=0.5"}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->get_header_value("Content-Type"),
              "application/openmetrics-text; version=1.0.0; charset=utf-8");
    EXPECT_EQ(fuzz::check_exposition(res->body, true), "") << res->body;
    auto plain = client.Get("/metrics");
    ASSERT_TRUE(plain);
    EXPECT_EQ(plain->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
    auto other = client.Get("/other");
    ASSERT_TRUE(other);
    EXPECT_EQ(other->status, 404);
  }
  const genscope::Run result = run.finish();
  EXPECT_TRUE(result.monitoring_errors.empty());
  const std::string after = endpoint->render();
  EXPECT_NE(after.find("genscope_run_active 0\n"), std::string::npos);
  EXPECT_EQ(after.find("genscope_current_step_elapsed_seconds"), std::string::npos);
  EXPECT_NE(after.find("genscope_runs_total{status=\"ok\"} 1\n"), std::string::npos);
  const auto [rc, lint] = promtool_check(after);
  EXPECT_EQ(rc, 0) << lint;
}

// The live model fed by events and a replay of the finished run give the same exposition.
TEST(MetricsEndpointTest, LiveFiguresEqualTheFinishedRunsFigures) {
  const auto scenario = scratch_dir() / "nvml.json";
  std::ofstream(scenario) << R"({"driver_version": "550.54.15",
    "devices": [{"name": "Fake H200", "uuid": "GPU-fake-0", "total": 150000000000,
                 "used": [1000000000, 9000000000], "utilization": {"gpu": 97, "memory": 40},
                 "temperature": 61, "power_mw": 450000, "clocks": {"sm": 1980, "mem": 3201},
                 "processes": [{"pid": "self", "used": 123456789}]}]})";
  setenv("GENSCOPE_FAKE_NVML_SCENARIO", scenario.c_str(), 1);
  MonitorOptions o;
  o.nvml_library = GENSCOPE_FAKE_NVML;
  o.sample_interval = 2ms;
  o.max_sample_interval = o.sample_interval;  // a fixed cadence
  Monitor monitor(o);
  auto endpoint = std::make_shared<MetricsEndpoint>();
  monitor.add_sink(endpoint);
  ActiveRun run = monitor.start_run({.pipeline = {.name = "t2i"}});
  {
    Step s = run.step(StepKind::kSampling, "denoise");
    s.begin_iterations();
    for (int i = 0; i < 4; ++i) {
      std::this_thread::sleep_for(3ms);
      s.mark_iteration();
    }
    s.add_counter("frames", 2);
    s.try_attempt("direct", [] { throw std::runtime_error("oom"); });
    s.try_attempt("tiled", [] {});
  }
  run.record_monitoring_error("probe-x", "unplugged");
  const genscope::Run result = run.finish();
  ASSERT_FALSE(result.gpus.empty()) << "the fake NVML was not loaded";
  for (MetricsFormat f : {MetricsFormat::kPrometheusText, MetricsFormat::kOpenMetrics}) {
    const std::string live = endpoint->render(f);
    EXPECT_EQ(live, render_metrics(result, f));
    EXPECT_EQ(fuzz::check_exposition(live, f == MetricsFormat::kOpenMetrics), "") << live;
    EXPECT_NE(live.find("genscope_gpu_power_watts{gpu=\"0\"} 450"), std::string::npos) << live;
  }
}

TEST(MetricsEndpointTest, APortInUseIsAMonitoringErrorNotAnException) {
  auto first = std::make_shared<MetricsEndpoint>();
  ASSERT_NE(first->port(), 0);
  MonitorOptions o = quiet();
  o.metrics_port = first->port();
  Monitor monitor(o);  // builds its own endpoint on the same port
  ActiveRun run = monitor.start_run();
  {
    Step s = run.step(StepKind::kCustom, "work");
  }
  const genscope::Run result = run.finish();
  ASSERT_EQ(result.steps.size(), 1u);
  EXPECT_EQ(result.steps[0].status, StepStatus::kOk);
  ASSERT_EQ(result.monitoring_errors.size(), 1u);
  EXPECT_EQ(result.monitoring_errors[0].source, "metrics");
  EXPECT_EQ(result.monitoring_errors[0].message,
            "cannot serve metrics on 127.0.0.1:" + std::to_string(first->port()) +
                ": Address already in use");

  MetricsEndpoint bad(MetricsEndpointOptions{.bind_address = "256.0.0.1", .port = 0});
  EXPECT_EQ(bad.port(), 0);
  EXPECT_EQ(bad.url(), "");
  EXPECT_NE(bad.error().find("cannot serve metrics on 256.0.0.1:0"), std::string::npos) << bad.error();
}

TEST(MetricsEndpointTest, MonitorOptionsServeOnTheGivenPort) {
  const int port = closed_port();
  MonitorOptions o = quiet();
  o.metrics_port = static_cast<std::uint16_t>(port);
  Monitor monitor(o);
  ActiveRun run = monitor.start_run({.pipeline = {.name = "opt"}});
  const std::string body = scrape_until(port, "genscope_run_info{pipeline=\"opt\"");
  EXPECT_EQ(fuzz::check_exposition(body, false), "");
  run.finish();
}

// --- Pushgateway client ------------------------------------------------------------------

TEST(Pushgateway, MalformedUrlsAreNamedErrors) {
  for (const char* url : {"", "localhost:9091", "ftp://host", "http://", "http://:9091",
                          "http://host:", "http://host:abc", "http://host:70000", "http://host:0",
                          "http://user@host:9091", "http://host:9091/x?y=1", "http://host#f",
                          "http://ho st", "http://[::1", "http://[]:9091", "http://[::1]x"}) {
    try {
      check_pushgateway_url(url);
      ADD_FAILURE() << "accepted " << url;
    } catch (const Error& e) {
      EXPECT_EQ(e.name(), "InvalidPushgatewayUrl") << url;
      EXPECT_NE(std::string(e.what()).find("expected http://HOST"), std::string::npos);
    }
  }
  for (const char* url : {"http://127.0.0.1:9091", "https://gw.example.org", "http://[::1]:9091/",
                          "http://gw:9091/prefix/path/"}) {
    EXPECT_NO_THROW(check_pushgateway_url(url)) << url;
  }
}

TEST(Pushgateway, GroupingKeyPaths) {
  // RFC 4648 §10 test vectors (base64url alphabet, no padding) and the README's example.
  EXPECT_EQ(detail::base64url("f"), "Zg");
  EXPECT_EQ(detail::base64url("fo"), "Zm8");
  EXPECT_EQ(detail::base64url("foo"), "Zm9v");
  EXPECT_EQ(detail::base64url("foobar"), "Zm9vYmFy");
  EXPECT_EQ(detail::base64url("/var/tmp"), "L3Zhci90bXA");
  EXPECT_EQ(detail::base64url("\xfb\xff"), "-_8");
  EXPECT_EQ(detail::pushgateway_group_path("genscope", "worker-1.lan"),
            "/metrics/job/genscope/instance/worker-1.lan");
  EXPECT_EQ(detail::pushgateway_group_path("genscope", ""), "/metrics/job/genscope/instance@base64/=");
  EXPECT_EQ(detail::pushgateway_group_path("a/b", "x y"),
            "/metrics/job@base64/YS9i/instance@base64/eCB5");
  // A rank's run: its own group on its host (docs/distributed.md).
  EXPECT_EQ(detail::pushgateway_group_path("genscope", "node-1", "3"),
            "/metrics/job/genscope/instance/node-1/rank/3");
}

// The ranks of one host: each rank's group keeps its own totals, and a rank's labels are on
// genscope_run_info.
TEST(Pushgateway, RanksKeepTheirOwnGroups) {
  genscope::Run run = rich_run();
  genscope::DistributedInfo d;
  d.rank = 1;
  d.world_size = 2;
  d.group = "job-7";
  run.distributed = d;
  run.host.hostname = "w1";
  const nlohmann::json answer = nlohmann::json::parse(R"({"status": "success", "data": [
    {"labels": {"job": "genscope", "instance": "w1", "rank": "0"},
     "genscope_runs_total": {"type": "COUNTER", "metrics": [
       {"labels": {"job": "genscope", "instance": "w1", "rank": "0", "status": "failed"}, "value": "40"}]}},
    {"labels": {"job": "genscope", "instance": "w1"},
     "genscope_runs_total": {"type": "COUNTER", "metrics": [
       {"labels": {"job": "genscope", "instance": "w1", "status": "failed"}, "value": "30"}]}},
    {"labels": {"job": "genscope", "instance": "w1", "rank": "1"},
     "genscope_runs_total": {"type": "COUNTER", "metrics": [
       {"labels": {"job": "genscope", "instance": "w1", "rank": "1", "status": "failed"}, "value": "2"}]}}]})");
  std::vector<detail::MetricFamily> families =
      detail::MetricsModel::from_run(run).families(run.start_unix_ns);
  detail::add_pushed_totals(families, answer, "genscope", "w1", "1");
  const std::string text = detail::write_exposition(families, MetricsFormat::kPrometheusText);
  EXPECT_NE(text.find("\ngenscope_runs_total{status=\"failed\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("genscope_run_info{pipeline=\"t2i\",model=\"sd\\\"15\\\"\",architecture=\"UNet\",host=\"w1\","
                      "rank=\"1\",world_size=\"2\",group=\"job-7\"} 1"),
            std::string::npos)
      << text;
  EXPECT_EQ(fuzz::check_exposition(text, false), "") << text;
}

TEST(Pushgateway, UnreachableGatewayIsPushFailed) {
  const std::string url = "http://127.0.0.1:" + std::to_string(closed_port());
  try {
    push_run_metrics(rich_run(), url, {.job = "genscope", .instance = "", .timeout = 2s});
    ADD_FAILURE() << "push to a closed port succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "PushFailed");
    EXPECT_NE(std::string(e.what()).find(url + "/metrics/job/genscope/instance/worker-1"),
              std::string::npos)
        << e.what();
  }
  // Through MonitorOptions: a monitoring error of the run; finish() returns normally.
  MonitorOptions o = quiet();
  o.pushgateway_url = url;
  Monitor monitor(o);
  ActiveRun run = monitor.start_run();
  { Step s = run.step(StepKind::kCustom, "work"); }
  const genscope::Run result = run.finish();
  ASSERT_EQ(result.monitoring_errors.size(), 1u);
  EXPECT_EQ(result.monitoring_errors[0].source, "pushgateway");
  EXPECT_NE(result.monitoring_errors[0].message.find("cannot push metrics to"), std::string::npos);
}

TEST(Pushgateway, ARefusingGatewayIsPushFailedWithItsAnswer) {
  // A real HTTP server that answers as a Pushgateway does to an inconsistent push.
  httplib::Server server;
  std::string received_path, received_body, received_type;
  server.Put(".*", [&](const httplib::Request& req, httplib::Response& res) {
    received_path = req.path;
    received_body = req.body;
    received_type = req.get_header_value("Content-Type");
    res.status = 400;
    res.set_content("pushed metrics are invalid or inconsistent with existing metrics\n", "text/plain");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread t([&] { server.listen_after_bind(); });
  while (!server.is_running()) std::this_thread::sleep_for(1ms);
  genscope::Run run = rich_run();
  run.host.hostname = "";
  try {
    push_run_metrics(run, "http://127.0.0.1:" + std::to_string(port) + "/gw/",
                     {.job = "genscope", .instance = "", .timeout = 2s});
    ADD_FAILURE() << "a 400 answer was taken for success";
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "PushFailed");
    EXPECT_NE(std::string(e.what()).find(
                  "answered HTTP 400: pushed metrics are invalid or inconsistent with existing metrics"),
              std::string::npos)
        << e.what();
  }
  server.stop();
  t.join();
  EXPECT_EQ(received_path, "/gw/metrics/job/genscope/instance@base64/=");
  EXPECT_EQ(received_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(received_body, render_metrics(run));
}

}  // namespace
}  // namespace genscope
