// The Prometheus options shared by demo/run/watch (see metrics_options.hpp).
#include "metrics_options.hpp"

#include <iostream>

namespace genscope::cli {

void add_metrics_options(CLI::App* cmd, MetricsCliOptions& options) {
  cmd->add_option("--metrics-port", options.port,
                  "serve live Prometheus metrics on this port while running (0 = any free "
                  "port; the URL is printed on stderr)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--metrics-linger", options.linger_seconds,
                  "after the run, keep serving metrics until one scrape has read the final "
                  "state or this many seconds have passed (default 5; 0 = stop at once)")
      ->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--metrics-bind", options.bind,
                  "address the metrics endpoint binds (default 127.0.0.1; 0.0.0.0 = all IPv4)");
  cmd->add_option("--pushgateway", options.pushgateway,
                  "push the run's final metrics to this Prometheus Pushgateway, e.g. "
                  "http://127.0.0.1:9091");
}

void configure_metrics(const MetricsCliOptions& options, MonitorOptions& monitor_options) {
  if (options.pushgateway.empty()) return;
  check_pushgateway_url(options.pushgateway);
  monitor_options.pushgateway_url = options.pushgateway;
}

std::shared_ptr<MetricsEndpoint> attach_metrics_endpoint(const MetricsCliOptions& options,
                                                         Monitor& monitor, std::string_view command) {
  if (options.port < 0) return nullptr;
  auto endpoint = std::make_shared<MetricsEndpoint>(MetricsEndpointOptions{
      .bind_address = options.bind,
      .port = static_cast<std::uint16_t>(options.port),
      .linger =
          std::chrono::milliseconds(static_cast<std::int64_t>(options.linger_seconds * 1000))});
  if (endpoint->port() != 0) {
    std::cerr << "genscope " << command << ": serving metrics on " << endpoint->url() << "\n";
  } else {
    std::cerr << "genscope " << command << ": warning: " << endpoint->error()
              << " (the pipeline runs without the endpoint)\n";
  }
  monitor.add_sink(endpoint);
  return endpoint;
}

void report_metrics_push(const MetricsCliOptions& options, const Run& run, std::string_view command) {
  if (options.pushgateway.empty()) return;
  for (const MonitoringError& e : run.monitoring_errors) {
    if (e.source == "pushgateway") {
      std::cerr << "genscope " << command << ": warning: metrics not pushed: " << e.message << "\n";
      return;
    }
  }
  std::cerr << "genscope " << command << ": metrics pushed to " << options.pushgateway << "\n";
}

}  // namespace genscope::cli
