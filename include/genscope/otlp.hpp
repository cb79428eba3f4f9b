// OpenTelemetry: finished runs sent to an OTLP collector as a trace and metrics
// (docs/opentelemetry.md).
//
// Each finished run becomes one trace (a root span for the run, one span per step, nested as
// the steps are; figures as attributes, iterations and attempts as span events) sent as an
// ExportTraceServiceRequest to <endpoint>/v1/traces, and its final figures (the same model
// and names as the Prometheus export, docs/metrics.md) as an ExportMetricsServiceRequest to
// <endpoint>/v1/metrics: OTLP/HTTP, binary protobuf (application/x-protobuf).
//
// Delivery never fails the pipeline: an OtlpExporter queues runs (bounded) for its own thread,
// which retries with exponential backoff (honouring Retry-After on 429/503) within a deadline;
// what could not be delivered is counted and named, never thrown.
//
// Example:
//   genscope::MonitorOptions options;
//   options.otlp.endpoint = "http://127.0.0.1:4318";   // or enabled + OTEL_EXPORTER_OTLP_ENDPOINT
//   genscope::Monitor monitor(options);                 // each finished run is exported
//   ...
//   genscope::export_run_otlp(run, {.endpoint = "http://collector:4318"});  // one run, now
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "genscope/run.hpp"

namespace genscope {

/// Where and how runs are sent.
struct OtlpOptions {
  /// Export when true (also implied by a non-empty endpoint).
  bool enabled = false;
  /// Base URL http(s)://HOST[:PORT][/PREFIX]; "/v1/traces" and "/v1/metrics" are appended.
  /// Empty: OTEL_EXPORTER_OTLP_ENDPOINT (and the signal-specific
  /// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / _METRICS_ENDPOINT, used as they are).
  std::string endpoint;
  /// Extra HTTP headers (e.g. an API key), added to those of OTEL_EXPORTER_OTLP_HEADERS.
  std::map<std::string, std::string> headers;
  /// Connect/read/write timeout of one request (OTEL_EXPORTER_OTLP_TIMEOUT when set).
  std::chrono::milliseconds timeout{5000};
  /// Longest time one run's delivery is retried for (both requests, backoffs included).
  std::chrono::milliseconds retry_deadline{15000};
  /// Longest a finished run waits for its own delivery before the run document is returned
  /// (a failure seen in that time is a monitoring error of that run; a later outcome is one of
  /// the next run). 0: never wait.
  std::chrono::milliseconds wait{3000};
  /// Runs queued for delivery beyond which a new run is dropped (and counted).
  std::size_t queue_capacity = 16;
  /// The resource's service.name.
  std::string service_name = "genscope";
};

/// The URLs one run is posted to, resolved from options and environment.
struct OtlpTargets {
  std::string traces_url;   ///< e.g. "http://127.0.0.1:4318/v1/traces"
  std::string metrics_url;  ///< e.g. "http://127.0.0.1:4318/v1/metrics"
  std::map<std::string, std::string> headers;
  std::chrono::milliseconds timeout{5000};
};

/// Resolves endpoint, headers and timeout (options first, then the OTEL_EXPORTER_OTLP_*
/// variables). Throws genscope::Error "InvalidOtlpEndpoint" when no endpoint is given anywhere
/// or a URL is malformed, "InvalidOtlpHeaders" for a malformed OTEL_EXPORTER_OTLP_HEADERS.
OtlpTargets resolve_otlp_targets(const OtlpOptions& options);

/// The run as an OTLP ExportTraceServiceRequest (protobuf bytes).
std::string encode_otlp_traces(const Run& run, std::string_view service_name = "genscope");
/// The run's final figures as an OTLP ExportMetricsServiceRequest (protobuf bytes).
std::string encode_otlp_metrics(const Run& run, std::string_view service_name = "genscope");

/// The trace id of a run (16 bytes, as 32 hex digits): the run id's 128 bits when it is 32
/// hex digits, else a hash of it.
std::string otlp_trace_id_hex(const Run& run);
/// The span id of a step (16 hex digits; step_id -1: the run's root span).
std::string otlp_span_id_hex(const Run& run, int step_id);

/// Sends one run now, retrying within options.retry_deadline. Throws genscope::Error
/// "InvalidOtlpEndpoint" / "InvalidOtlpHeaders" for bad settings and "OtlpExportFailed"
/// when it could not be delivered.
void export_run_otlp(const Run& run, const OtlpOptions& options = {});

/// What an exporter did so far.
struct OtlpCounts {
  std::uint64_t delivered = 0;  ///< Runs whose trace and metrics the collector accepted.
  std::uint64_t failed = 0;     ///< Runs given up after retries (or refused for good).
  std::uint64_t dropped = 0;    ///< Runs not queued because the queue was full.
  std::uint64_t pending = 0;    ///< Runs queued or being sent.
};

/// The outcome of one submitted run.
enum class OtlpOutcome { kPending, kDelivered, kFailed, kDropped };

/// Sends runs from its own thread: submit() only encodes and queues. Thread-safe.
class OtlpExporter {
 public:
  /// Throws like resolve_otlp_targets() for bad settings (before any run).
  explicit OtlpExporter(OtlpOptions options);
  /// Waits for queued runs up to options.wait, then leaves the rest (counted as failed).
  ~OtlpExporter();
  OtlpExporter(const OtlpExporter&) = delete;
  OtlpExporter& operator=(const OtlpExporter&) = delete;

  /// Queues `run`; returns its ticket (never throws; a full queue drops it: kDropped).
  std::uint64_t submit(const Run& run) noexcept;
  /// Waits up to `wait` for the ticket's outcome; `error` gets why it failed.
  OtlpOutcome wait(std::uint64_t ticket, std::chrono::milliseconds wait, std::string* error = nullptr);
  /// submit(run), then wait up to OtlpOptions::wait for it: "" when it was delivered, else
  /// what went wrong (its failure, or that it was not confirmed in time), with the failures
  /// of earlier runs learnt since and the counts. What a sink or a CLI records as the run's
  /// monitoring error (source "otlp").
  std::string send(const Run& run);
  /// Failures of runs whose outcome nobody waited for (then forgotten): "run ID: why".
  std::vector<std::string> take_unreported_failures();
  OtlpCounts counts() const;
  /// "http://HOST:PORT/v1/traces" (for messages).
  const std::string& traces_url() const noexcept;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace genscope
