// Pushing a finished run's metrics to a Prometheus Pushgateway (cpp-httplib client).
//
// PUT <prefix>/metrics/job/<job>/instance/<instance> with a text 0.0.4 body and no
// timestamps (the gateway rejects pushes with timestamps; prometheus/pushgateway README.md);
// counters and histograms carry the group's totals over (pushgateway_counters.hpp).
#include "sinks/pushgateway_sink.hpp"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <chrono>

#include "genscope/error.hpp"
#include "genscope/metrics.hpp"
#include "report/metrics_exposition.hpp"
#include "report/metrics_model.hpp"
#include "sinks/http_url.hpp"
#include "sinks/pushgateway_counters.hpp"

namespace genscope::detail {
namespace {

HttpUrl parse_gateway_url(std::string_view url) {
  return parse_http_url(url, "InvalidPushgatewayUrl", "pushgateway URL",
                        "http://HOST[:PORT][/PREFIX], e.g. http://127.0.0.1:9091");
}

bool url_safe(std::string_view value) {
  return !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
    const unsigned char u = static_cast<unsigned char>(c);
    return std::isalnum(u) || c == '-' || c == '_' || c == '.' || c == '~';
  });
}

std::string group_segment(std::string_view label, std::string_view value) {
  if (url_safe(value)) return "/" + std::string(label) + "/" + std::string(value);
  return "/" + std::string(label) + "@base64/" + base64url(value);
}

}  // namespace

std::string base64url(std::string_view bytes) {
  if (bytes.empty()) return "=";
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : bytes) {
    acc = (acc << 8) | static_cast<unsigned char>(c);
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += kAlphabet[(acc >> bits) & 0x3F];
    }
  }
  if (bits > 0) out += kAlphabet[(acc << (6 - bits)) & 0x3F];
  return out;
}

std::string pushgateway_group_path(std::string_view job, std::string_view instance,
                                   std::string_view rank) {
  return "/metrics" + group_segment("job", job) + group_segment("instance", instance) +
         (rank.empty() ? std::string() : group_segment("rank", rank));
}

void PushgatewaySink::run_finished(const Run& run) { push_run_metrics(run, url_); }

}  // namespace genscope::detail

namespace genscope {

void check_pushgateway_url(std::string_view gateway_url) {
  detail::parse_gateway_url(gateway_url);
}

void push_run_metrics(const Run& run, std::string_view gateway_url, const PushOptions& options) {
  const detail::HttpUrl url = detail::parse_gateway_url(gateway_url);
  const std::string instance = options.instance.empty() ? run.host.hostname : options.instance;
  // A rank's run has its own group: ranks on one host never replace each other's series.
  const std::string rank = run.distributed && run.distributed->role == "rank"
                               ? std::to_string(run.distributed->rank)
                               : std::string();
  const std::string path = url.prefix + detail::pushgateway_group_path(options.job, instance, rank);

  httplib::Client client(url.origin);
  if (!client.is_valid()) {
    throw Error("InvalidPushgatewayUrl",
                "pushgateway URL '" + std::string(gateway_url) + "': not usable by the HTTP client");
  }
  const auto timeout = options.timeout;
  client.set_connection_timeout(timeout);
  client.set_read_timeout(timeout);
  client.set_write_timeout(timeout);
  // Counters keep counting across pushes: the group's current totals are added to this run's
  // (an unreadable answer restarts them, which increase() reads as a counter reset).
  std::vector<detail::MetricFamily> families =
      detail::MetricsModel::from_run(run).families(run.start_unix_ns + run.duration_ns);
  if (const httplib::Result current = client.Get(url.prefix + "/api/v1/metrics");
      current && current->status == 200) {
    const nlohmann::json answer = nlohmann::json::parse(current->body, nullptr, false);
    if (!answer.is_discarded()) detail::add_pushed_totals(families, answer, options.job, instance, rank);
  }
  const std::string body = detail::write_exposition(families, MetricsFormat::kPrometheusText);
  const httplib::Result res =
      client.Put(path, body, std::string(metrics_content_type(MetricsFormat::kPrometheusText)));
  const std::string target = url.origin + path;
  if (!res) {
    throw Error("PushFailed", "cannot push metrics to " + target + ": " +
                                  httplib::to_string(res.error()));
  }
  if (res->status < 200 || res->status > 299) {
    std::string answer = res->body.substr(0, 300);
    while (!answer.empty() && (answer.back() == '\n' || answer.back() == '\r')) answer.pop_back();
    throw Error("PushFailed", "pushgateway " + target + " answered HTTP " +
                                  std::to_string(res->status) +
                                  (answer.empty() ? std::string() : ": " + answer));
  }
}

}  // namespace genscope
