// Posting encoded OTLP requests (private to src/otlp/): one POST with the OTLP/HTTP rules, and
// the retry loop around it (OTLP specification, "OTLP/HTTP": "Failures", "Retryable Response
// Codes", "Throttling").
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "genscope/otlp.hpp"

namespace genscope::detail::otlp {

/// One run's two requests.
struct EncodedRun {
  std::string run_id;
  std::string traces;   ///< ExportTraceServiceRequest
  std::string metrics;  ///< ExportMetricsServiceRequest
};

/// Waits `duration` unless cancelled; returns false when cancelled (give up now).
using Sleeper = std::function<bool(std::chrono::milliseconds duration)>;

/// The first backoff and its cap (doubled after each retryable failure, ±20 % jitter).
inline constexpr std::chrono::milliseconds kFirstBackoff{250};
inline constexpr std::chrono::milliseconds kMaxBackoff{5000};

/// Posts both requests, retrying retryable failures (connection errors, 429, 502, 503, 504;
/// Retry-After in seconds honoured) until `deadline`. Returns an empty string when both were
/// accepted (2xx), else why not.
std::string deliver(const EncodedRun& run, const OtlpTargets& targets,
                    std::chrono::steady_clock::time_point deadline, const Sleeper& sleep);

/// The delay a Retry-After value asks for (delta-seconds only; an HTTP date or anything else:
/// -1).
std::chrono::milliseconds parse_retry_after(std::string_view value);
/// OTEL_EXPORTER_OTLP_HEADERS syntax: "k1=v1,k2=v2", keys and values trimmed, values
/// percent-decoded. Throws genscope::Error "InvalidOtlpHeaders".
std::map<std::string, std::string> parse_otlp_headers(std::string_view text);

}  // namespace genscope::detail::otlp
