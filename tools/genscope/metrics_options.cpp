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
  add_otlp_option(cmd, options.otlp);
}

void add_otlp_option(CLI::App* cmd, std::string& otlp) {
  cmd->add_option("--otlp", otlp,
                  "export the run as an OpenTelemetry trace and metrics to this OTLP/HTTP "
                  "collector, e.g. http://127.0.0.1:4318 ('env': OTEL_EXPORTER_OTLP_ENDPOINT)");
}

OtlpOptions otlp_options(const std::string& otlp) {
  OtlpOptions o;
  o.enabled = true;
  if (otlp != "env") o.endpoint = otlp;
  resolve_otlp_targets(o);  // InvalidOtlpEndpoint / InvalidOtlpHeaders now, not at run end
  return o;
}

void configure_metrics(const MetricsCliOptions& options, MonitorOptions& monitor_options) {
  if (!options.otlp.empty()) otlp_options(options.otlp);  // InvalidOtlpEndpoint now
  if (options.pushgateway.empty()) return;
  check_pushgateway_url(options.pushgateway);
  monitor_options.pushgateway_url = options.pushgateway;
}

std::unique_ptr<OtlpExporter> make_otlp_exporter(const MetricsCliOptions& options) {
  if (options.otlp.empty()) return nullptr;
  return std::make_unique<OtlpExporter>(otlp_options(options.otlp));
}

void export_otlp(OtlpExporter* exporter, Run& run) {
  if (exporter == nullptr) return;
  std::string problem = exporter->send(run);
  if (!problem.empty())
    run.monitoring_errors.push_back({"otlp", std::move(problem), run.duration_ns, {}});
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
  if (!options.otlp.empty()) {
    const MonitoringError* failed = nullptr;
    for (const MonitoringError& e : run.monitoring_errors) {
      if (e.source == "otlp") failed = &e;
    }
    if (failed != nullptr) {
      std::cerr << "genscope " << command << ": warning: OpenTelemetry export: " << failed->message
                << "\n";
    } else {
      std::cerr << "genscope " << command << ": run exported to "
                << resolve_otlp_targets(otlp_options(options.otlp)).traces_url << " (trace "
                << otlp_trace_id_hex(run) << ")\n";
    }
  }
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
