// Prometheus / OpenMetrics: a run's figures in the formats monitoring systems scrape.
//
// Two ways out, one naming (docs/metrics.md lists every metric):
// - live: a MetricsEndpoint (or MonitorOptions::metrics_port) is a Sink that keeps the current
//   figures of a monitor's runs and serves them on http://ADDR:PORT/metrics while they run;
// - finished: render_metrics(run) gives a finished Run's final figures, and
//   push_run_metrics(run, url) PUTs them to a Prometheus Pushgateway (short-lived jobs).
// Both fill the same model from the same events, so names, labels and units never differ.
//
// Example:
//   genscope::MonitorOptions options;
//   options.metrics_port = 9464;                          // serves 127.0.0.1:9464/metrics
//   genscope::Monitor monitor(options);
//   ...
//   genscope::Run run = active.finish();
//   genscope::push_run_metrics(run, "http://pushgateway:9091");  // throws genscope::Error
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "genscope/run.hpp"
#include "genscope/sink.hpp"

namespace genscope {

/// The exposition formats genscope writes.
enum class MetricsFormat {
  kPrometheusText,  ///< Prometheus text format 0.0.4 (what promtool and the Pushgateway read).
  kOpenMetrics,     ///< OpenMetrics 1.0.0 text (ends with "# EOF").
};

/// The HTTP Content-Type of `format`, e.g. "text/plain; version=0.0.4; charset=utf-8".
std::string_view metrics_content_type(MetricsFormat format) noexcept;

/// The format to answer a scrape with, from its Accept header: OpenMetrics 1.0.0 when the
/// scraper prefers application/openmetrics-text (as Prometheus does), else text 0.0.4.
MetricsFormat negotiate_metrics_format(std::string_view accept_header) noexcept;

/// The final figures of a finished run as an exposition without timestamps.
std::string render_metrics(const Run& run, MetricsFormat format = MetricsFormat::kPrometheusText);

/// Where a push goes, beyond the gateway's address.
struct PushOptions {
  std::string job = "genscope";  ///< The grouping key's job.
  std::string instance;          ///< The grouping key's instance; empty = the run's host name.
  std::chrono::milliseconds timeout{5000};  ///< Connect, read and write timeout each.
};

/// Throws genscope::Error "InvalidPushgatewayUrl" unless `gateway_url` is
/// http(s)://HOST[:PORT][/PATH-PREFIX] (no user info, query or fragment).
void check_pushgateway_url(std::string_view gateway_url);

/// PUTs render_metrics(run) to `<gateway_url>/metrics/job/<job>/instance/<instance>`, plus
/// `/rank/<rank>` for a rank's run of a distributed job (replacing that group: the ranks of
/// one host keep their own series; docs/distributed.md). Throws genscope::Error "InvalidPushgatewayUrl" for a malformed URL
/// and "PushFailed" when the gateway cannot be reached or does not answer 2xx.
void push_run_metrics(const Run& run, std::string_view gateway_url, const PushOptions& options = {});

/// Where a MetricsEndpoint listens.
struct MetricsEndpointOptions {
  std::string bind_address = "127.0.0.1";  ///< Host or address to bind ("0.0.0.0" = all IPv4).
  std::uint16_t port = 0;                  ///< 0 = a free port chosen by the system.
  /// After a run finished, the destructor keeps serving until one scrape has read the
  /// finished run's figures or this time has passed (0: stop at once). Lets a scraper see the
  /// last state of a short job (genscope run/demo/watch: --metrics-linger, default 5 s).
  std::chrono::milliseconds linger{0};
};

/// A live-event sink that serves the current figures of its monitor's runs on GET /metrics
/// (text 0.0.4, or OpenMetrics when asked) from its own thread. Serving starts at
/// construction and stops at destruction (after the linger, see MetricsEndpointOptions); a
/// bind failure is not thrown: error() says why and every run gets it as a monitoring error
/// (source "metrics"). Slow or stalled clients are bounded: each connection has 5 s to send
/// its request and take the answer, at most 64 are open at once, the listen backlog is
/// SOMAXCONN; none of them delays a scrape or the destructor beyond that.
class MetricsEndpoint final : public Sink {
 public:
  /// Binds and starts serving; never throws for a port in use or a bad address.
  explicit MetricsEndpoint(MetricsEndpointOptions options = {});
  ~MetricsEndpoint() override;
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  /// The bound port (the chosen one when asked for 0); 0 when not serving.
  std::uint16_t port() const noexcept;
  /// "http://ADDR:PORT/metrics"; empty when not serving.
  std::string url() const;
  /// Why it is not serving; empty when it is.
  std::string error() const;
  /// The exposition a scrape would get now.
  std::string render(MetricsFormat format = MetricsFormat::kPrometheusText) const;

  std::string name() const override { return "metrics"; }
  unsigned events() const override {
    return kRunEvents | kStepEvents | kIterationEvents | kSampleEvents | kErrorEvents;
  }
  void run_started(const Run& run) override;
  void step_began(const StepRecord& step) override;
  void iteration(int step_id, std::size_t index, std::int64_t duration_ns) override;
  void step_ended(const StepRecord& step) override;
  void sample(std::int64_t offset_ns, std::span<const double> values) override;
  void monitoring_error(const MonitoringError& error) override;
  void run_finished(const Run& run) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace genscope
