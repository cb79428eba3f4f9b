// OTLP/HTTP delivery: targets from options and environment, POST, retries (otlp_delivery.hpp).
#include "otlp/otlp_delivery.hpp"

#include <httplib.h>

#include <cstdlib>
#include <random>
#include <thread>

#include "genscope/error.hpp"
#include "sinks/http_url.hpp"

namespace genscope {
namespace detail::otlp {
namespace {

constexpr const char* kExpected = "http(s)://HOST[:PORT][/PATH], e.g. http://127.0.0.1:4318";

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A base URL ("http://host:4318", "http://host:4318/prefix/") plus "/v1/<signal>".
std::string signal_url(std::string_view base, std::string_view signal, std::string_view what) {
  const HttpUrl url = parse_http_url(base, "InvalidOtlpEndpoint", what, kExpected);
  return url.origin + url.prefix + "/v1/" + std::string(signal);
}

// A signal-specific URL, used as it is (OTLP exporter configuration: "used as-is").
std::string exact_url(std::string_view url, std::string_view what) {
  const HttpUrl parsed = parse_http_url(url, "InvalidOtlpEndpoint", what, kExpected);
  return parsed.origin + (parsed.prefix.empty() ? std::string("/") : parsed.prefix);
}

struct Attempt {
  bool ok = false;
  bool retryable = false;
  std::chrono::milliseconds retry_after{-1};
  std::string error;
};

Attempt post(const std::string& url, const std::string& body, const OtlpTargets& targets) {
  const HttpUrl parsed = parse_http_url(url, "InvalidOtlpEndpoint", "OTLP endpoint", kExpected);
  httplib::Client client(parsed.origin);
  Attempt a;
  if (!client.is_valid()) {
    a.error = "OTLP endpoint '" + url + "': not usable by the HTTP client";
    return a;
  }
  client.set_connection_timeout(targets.timeout);
  client.set_read_timeout(targets.timeout);
  client.set_write_timeout(targets.timeout);
  httplib::Headers headers;
  for (const auto& [key, value] : targets.headers) headers.emplace(key, value);
  const httplib::Result res = client.Post(parsed.prefix.empty() ? "/" : parsed.prefix, headers,
                                          body, "application/x-protobuf");
  if (!res) {
    a.retryable = true;
    a.error = url + ": " + httplib::to_string(res.error());
    return a;
  }
  if (res->status >= 200 && res->status <= 299) {
    a.ok = true;
    return a;
  }
  const int s = res->status;
  a.retryable = s == 429 || s == 502 || s == 503 || s == 504;
  if (a.retryable && res->has_header("Retry-After")) {
    a.retry_after = parse_retry_after(res->get_header_value("Retry-After"));
  }
  a.error = url + " answered HTTP " + std::to_string(s);
  // The body is a protobuf google.rpc.Status for application/x-protobuf; its message is
  // readable text among the bytes, so a printable prefix helps more than nothing.
  std::string text;
  for (char c : res->body.substr(0, 300)) text += (c >= 0x20 && c < 0x7F) ? c : ' ';
  text = trim(text);
  if (!text.empty()) a.error += ": " + text;
  return a;
}

}  // namespace

std::chrono::milliseconds parse_retry_after(std::string_view value) {
  const std::string v = trim(value);
  if (v.empty() || v.size() > 9) return std::chrono::milliseconds(-1);
  std::int64_t seconds = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return std::chrono::milliseconds(-1);
    seconds = seconds * 10 + (c - '0');
  }
  return std::chrono::milliseconds(seconds * 1000);
}

std::map<std::string, std::string> parse_otlp_headers(std::string_view text) {
  std::map<std::string, std::string> out;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    if (trim(item).empty()) continue;
    const std::size_t eq = item.find('=');
    const std::string key = trim(item.substr(0, eq));
    if (eq == std::string_view::npos || key.empty()) {
      throw Error("InvalidOtlpHeaders", "OTEL_EXPORTER_OTLP_HEADERS: '" + trim(item) +
                                            "' is not key=value (expected k1=v1,k2=v2)");
    }
    const std::string raw = trim(item.substr(eq + 1));
    std::string value;
    for (std::size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '%' && i + 2 < raw.size() + 0 && hex_value(raw[i + 1]) >= 0 &&
          hex_value(raw[i + 2]) >= 0) {
        value += static_cast<char>(hex_value(raw[i + 1]) * 16 + hex_value(raw[i + 2]));
        i += 2;
      } else {
        value += raw[i];
      }
    }
    for (char c : key + value) {
      if (c == '\r' || c == '\n' || c == '\0') {
        throw Error("InvalidOtlpHeaders",
                    "OTEL_EXPORTER_OTLP_HEADERS: header '" + key + "' holds a line break or NUL");
      }
    }
    out[key] = value;
  }
  return out;
}

std::string deliver(const EncodedRun& run, const OtlpTargets& targets,
                    std::chrono::steady_clock::time_point deadline, const Sleeper& sleep) {
  thread_local std::minstd_rand jitter(std::random_device{}());
  std::chrono::milliseconds backoff = kFirstBackoff;
  int attempts = 0;
  for (const auto& [url, body] : {std::pair{&targets.traces_url, &run.traces},
                                  std::pair{&targets.metrics_url, &run.metrics}}) {
    while (true) {
      ++attempts;
      const Attempt a = post(*url, *body, targets);
      if (a.ok) break;
      if (!a.retryable) return a.error + " (not retried)";
      std::chrono::milliseconds delay = backoff;
      if (a.retry_after.count() >= 0) {
        delay = a.retry_after;
      } else {
        std::uniform_int_distribution<int> pct(80, 120);
        delay = backoff * pct(jitter) / 100;
      }
      backoff = std::min(backoff * 2, kMaxBackoff);
      if (std::chrono::steady_clock::now() + delay >= deadline) {
        return a.error + " (gave up after " + std::to_string(attempts) + " attempt(s))";
      }
      if (!sleep(delay))
        return a.error + " (cancelled after " + std::to_string(attempts) + " attempt(s))";
    }
  }
  return {};
}

}  // namespace detail::otlp

OtlpTargets resolve_otlp_targets(const OtlpOptions& options) {
  using namespace detail::otlp;
  OtlpTargets t;
  if (!options.endpoint.empty()) {
    t.traces_url = signal_url(options.endpoint, "traces", "OTLP endpoint");
    t.metrics_url = signal_url(options.endpoint, "metrics", "OTLP endpoint");
  } else {
    const std::string base = env("OTEL_EXPORTER_OTLP_ENDPOINT");
    const std::string traces = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    const std::string metrics = env("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT");
    if (!traces.empty()) {
      t.traces_url = exact_url(traces, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    } else if (!base.empty()) {
      t.traces_url = signal_url(base, "traces", "OTEL_EXPORTER_OTLP_ENDPOINT");
    }
    if (!metrics.empty()) {
      t.metrics_url = exact_url(metrics, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT");
    } else if (!base.empty()) {
      t.metrics_url = signal_url(base, "metrics", "OTEL_EXPORTER_OTLP_ENDPOINT");
    }
    if (t.traces_url.empty() || t.metrics_url.empty()) {
      throw genscope::Error("InvalidOtlpEndpoint",
                            "no OTLP endpoint: give one (e.g. --otlp http://127.0.0.1:4318) or "
                            "set OTEL_EXPORTER_OTLP_ENDPOINT");
    }
  }
  t.headers = parse_otlp_headers(env("OTEL_EXPORTER_OTLP_HEADERS"));
  for (const auto& [key, value] : options.headers) t.headers[key] = value;
  t.timeout = options.timeout;
  if (const std::string ms = env("OTEL_EXPORTER_OTLP_TIMEOUT"); !ms.empty()) {
    char* end = nullptr;
    const long v = std::strtol(ms.c_str(), &end, 10);
    if (end != nullptr && *end == '\0' && v > 0) t.timeout = std::chrono::milliseconds(v);
  }
  return t;
}

void export_run_otlp(const Run& run, const OtlpOptions& options) {
  const OtlpTargets targets = resolve_otlp_targets(options);
  const detail::otlp::EncodedRun encoded{run.id, encode_otlp_traces(run, options.service_name),
                                         encode_otlp_metrics(run, options.service_name)};
  const std::string error = detail::otlp::deliver(
      encoded, targets, std::chrono::steady_clock::now() + options.retry_deadline,
      [](std::chrono::milliseconds d) {
        std::this_thread::sleep_for(d);
        return true;
      });
  if (!error.empty()) throw Error("OtlpExportFailed", "run " + run.id + " not exported: " + error);
}

}  // namespace genscope
