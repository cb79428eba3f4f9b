// Shared by the commands that monitor a pipeline (demo, run, watch): the Prometheus options
// --metrics-port, --metrics-bind and --pushgateway (docs/metrics.md) and the OpenTelemetry
// export --otlp (docs/opentelemetry.md), through the public API.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "genscope/metrics.hpp"
#include "genscope/monitor.hpp"
#include "genscope/otlp.hpp"

namespace genscope::cli {

/// The parsed metrics options of one command.
struct MetricsCliOptions {
  int port = -1;  ///< -1 = no endpoint; 0 = a free port chosen by the system.
  std::string bind = "127.0.0.1";
  double linger_seconds = 5;  ///< --metrics-linger: MetricsEndpointOptions::linger.
  std::string pushgateway;  ///< Empty = no push.
  std::string otlp;         ///< Empty = no OTLP export; "env" = OTEL_EXPORTER_OTLP_ENDPOINT.
};

/// Adds --otlp URL|env to `cmd` (shared with `report`).
void add_otlp_option(CLI::App* cmd, std::string& otlp);
/// The OtlpOptions of --otlp VALUE; checks the endpoint (InvalidOtlpEndpoint before any work).
OtlpOptions otlp_options(const std::string& otlp);

/// Adds --metrics-port, --metrics-linger, --metrics-bind, --pushgateway and --otlp to `cmd`.
void add_metrics_options(CLI::App* cmd, MetricsCliOptions& options);
/// Checks the Pushgateway URL (InvalidPushgatewayUrl before any work) and the OTLP endpoint,
/// and sets MonitorOptions::pushgateway_url. (The OTLP export is not a monitor sink here: the
/// commands add notes and labels to the finished run, so they export the run they save.)
void configure_metrics(const MetricsCliOptions& options, MonitorOptions& monitor_options);
/// Starts the endpoint when asked and adds it to `monitor`; prints its URL (or why it could
/// not bind: the pipeline runs anyway) on stderr.
std::shared_ptr<MetricsEndpoint> attach_metrics_endpoint(const MetricsCliOptions& options,
                                                         Monitor& monitor, std::string_view command);
/// The exporter --otlp asks for; nullptr when not asked for.
std::unique_ptr<OtlpExporter> make_otlp_exporter(const MetricsCliOptions& options);
/// Sends `run` (when `exporter` is not null), waiting up to OtlpOptions::wait; a failure or a
/// run not confirmed in time becomes a monitoring error of `run` (source "otlp").
void export_otlp(OtlpExporter* exporter, Run& run);
/// Prints on stderr whether the push and the OTLP export of `run` succeeded (its monitoring
/// errors say).
void report_metrics_push(const MetricsCliOptions& options, const Run& run, std::string_view command);

}  // namespace genscope::cli
