// libFuzzer target: what the metrics code reads from outside — a scraper's Accept header, a
// Pushgateway URL, and arbitrary step, counter, label and probe-figure names in a run. The
// negotiation always picks a format, the URL is accepted or rejected with its named error,
// and both expositions of a run carrying the input everywhere stay valid (exposition_check).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string>

#include "exposition_check.hpp"
#include "genscope/error.hpp"
#include "genscope/metrics.hpp"
#include "sinks/pushgateway_sink.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace genscope;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const MetricsFormat f = negotiate_metrics_format(text);
  if (f != MetricsFormat::kPrometheusText && f != MetricsFormat::kOpenMetrics) std::abort();
  try {
    check_pushgateway_url(text);
  } catch (const Error& e) {
    if (e.name() != "InvalidPushgatewayUrl") std::abort();
  }
  const std::string path = detail::pushgateway_group_path(text, text);
  if (path.find("//") != std::string::npos && !text.empty()) std::abort();

  Run run;
  run.start_unix_ns = 1'700'000'000'000'000'000;
  run.duration_ns = 2'000'000'000;
  run.pipeline = {text, text, text, {}};
  run.gpus.push_back({0, text, text, text, 1e9});
  run.series.metrics = {"process.rss_bytes", text, "gpu0." + text, "alloc." + text + ".allocated_bytes"};
  run.series.units = {Unit::kBytes, static_cast<Unit>(size % 6), Unit::kPercent, Unit::kBytes};
  run.series.offset_ns = {0};
  run.series.values = {1e6, 0.5, 50, 2e6};
  run.series.samples_taken = 1;
  StepRecord step;
  step.name = text;
  step.kind = static_cast<StepKind>(size % 8);
  step.status = static_cast<StepStatus>(size % 3);
  step.duration_ns = static_cast<std::int64_t>(size) * 1'000'000;
  step.counters[text] = 3;
  step.attempts.push_back({text, StepStatus::kFailed, text, 5});
  step.iteration_ns = {1'000'000, 2'000'000};
  step.metrics.push_back({"process.rss_bytes", Unit::kBytes, 1e6, 2e6, 3e6, 10, "exact"});
  run.steps.push_back(step);
  run.monitoring_errors.push_back({text, text, 0, text});
  for (MetricsFormat format : {MetricsFormat::kPrometheusText, MetricsFormat::kOpenMetrics}) {
    const std::string out = render_metrics(run, format);
    const std::string problem = fuzz::check_exposition(out, format == MetricsFormat::kOpenMetrics);
    if (!problem.empty()) {
      std::fprintf(stderr, "invalid exposition: %s\n%s\n", problem.c_str(), out.c_str());
      std::abort();
    }
  }
  return 0;
}
