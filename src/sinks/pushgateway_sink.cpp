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
#include "sinks/pushgateway_counters.hpp"

namespace genscope::detail {
namespace {

struct GatewayUrl {
  std::string origin;  // scheme://host[:port], as httplib::Client takes it
  std::string prefix;  // path before /metrics, without a trailing '/'
};

[[noreturn]] void bad_url(std::string_view url, const std::string& why) {
  throw Error("InvalidPushgatewayUrl",
              "pushgateway URL '" + std::string(url) + "': " + why +
                  " (expected http://HOST[:PORT][/PREFIX], e.g. http://127.0.0.1:9091)");
}

GatewayUrl parse_gateway_url(std::string_view url) {
  for (char c : url) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7F) bad_url(url, "spaces or control characters");
  }
  std::string_view rest = url;
  GatewayUrl out;
  if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
    out.origin = "http://";
  } else if (rest.starts_with("https://")) {
    rest.remove_prefix(8);
    out.origin = "https://";
  } else {
    bad_url(url, "the scheme must be http:// or https://");
  }
  if (rest.find_first_of("?#") != std::string_view::npos) bad_url(url, "no query or fragment");
  const std::size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) bad_url(url, "user info is not supported");
  std::string_view host = authority;
  std::string_view port;
  if (authority.starts_with("[")) {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) bad_url(url, "unclosed '[' in the host");
    host = authority.substr(0, close + 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') bad_url(url, "unexpected text after the IPv6 address");
      port = after.substr(1);
    }
    if (host.size() <= 2) bad_url(url, "empty host");
  } else {
    const std::size_t colon = authority.find(':');
    if (colon != std::string_view::npos) {
      host = authority.substr(0, colon);
      port = authority.substr(colon + 1);
      if (port.empty()) bad_url(url, "empty port");
    }
  }
  if (host.empty()) bad_url(url, "no host");
  if (!port.empty() || authority.ends_with(":")) {
    if (port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      bad_url(url, "the port must be a number");
    }
    const int p = std::stoi(std::string(port));
    if (p < 1 || p > 65535) bad_url(url, "the port must be 1-65535");
  }
  out.origin += std::string(authority);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  out.prefix = std::string(path);
  return out;
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
  const detail::GatewayUrl url = detail::parse_gateway_url(gateway_url);
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
